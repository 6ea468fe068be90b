// Package docscheck reads the shell walkthroughs of a Markdown file that are marked to be run, so that a test can
// run them as a reader would and check what each step says it shows. A walkthrough is a code block (indented by
// four spaces, or fenced) directly after a marker line
//
//	<!-- docs-check: NAME -->            steps, run one after the other in one shell
//	<!-- docs-check: NAME paced -->      steps, with a person's pause before each step after the first: the
//	                                     reader acts on a change of the worker's state (a stream's new limit)
//	                                     no sooner than a person would, and no later either
//	<!-- docs-check: NAME terminals -->  one long-running command per line, each in a terminal of its own
//
// In a steps block, a line starting with "# " right after a command is what the command prints: its pieces between
// "..." must appear in the output in that order. A line ending in a backslash continues on the next.
//
// The marker is an HTML comment, so it is invisible on GitHub; tying each block to a name (rather than running
// every code block) lets the prose around a block keep examples that are not meant to run (YAML, output).
//
// Only this package's tests read the documents (Parse, Match, Links, Anchors), so that code lives in its test
// files and is built for them alone.
package docscheck
