package embedded

// AwaitStart is awaitStart: the wait, after Start has given a server up, for its own start to return.
var AwaitStart = awaitStart

// LockStore takes the store directory's lock as Start does; the returned func releases it.
func LockStore(dir string) (release func(), err error) {
	l, err := lockStore(dir)
	if err != nil {
		return nil, err
	}
	return l.release, nil
}
