package hashing

import (
	"math"
	"strconv"
)

// appendErlangFloat appends f the way Erlang's float_to_binary(F, [short]) writes it (which is how Elixir's JSON
// encoder writes floats): the shortest digits that round-trip, in scientific notation when |f| >= 2^53, otherwise in
// whichever of plain ("100.0", "0.0001") and scientific ("1.0e3", "1.0e-5") notation is shorter, plain on a tie.
// Both notations always have a fraction digit; the exponent has no '+' and no leading zeros.
func appendErlangFloat(dst []byte, f float64) []byte {
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // e.g. "-1.2345e+06", "5e-324", "0e+00"
	if e[0] == '-' {
		dst = append(dst, '-')
		e = e[1:]
	}
	// Split "d[.ddd]e±xx" into its digits and decimal exponent.
	k := 0
	for e[k] != 'e' {
		k++
	}
	var digits [24]byte
	nd := 0
	for _, c := range e[:k] {
		if c != '.' {
			digits[nd] = c
			nd++
		}
	}
	exp := 0
	for _, c := range e[k+2:] {
		exp = exp*10 + int(c-'0')
	}
	if e[k+1] == '-' {
		exp = -exp
	}

	expLen := len(strconv.AppendInt(tmp[:0], int64(exp), 10))
	sciLen := 2 + max(nd-1, 1) + 1 + expLen // d.ddd e exp
	point := exp + 1                        // digits before the decimal point
	var plainLen int
	switch {
	case point <= 0:
		plainLen = 2 - point + nd // 0.000ddd
	case point >= nd:
		plainLen = point + 2 // ddd000.0
	default:
		plainLen = nd + 1 // dd.dd
	}

	if math.Abs(f) >= 1<<53 || sciLen < plainLen {
		dst = append(dst, digits[0], '.')
		if nd > 1 {
			dst = append(dst, digits[1:nd]...)
		} else {
			dst = append(dst, '0')
		}
		dst = append(dst, 'e')
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	switch {
	case point <= 0:
		dst = append(dst, '0', '.')
		for range -point {
			dst = append(dst, '0')
		}
		dst = append(dst, digits[:nd]...)
	case point >= nd:
		dst = append(dst, digits[:nd]...)
		for range point - nd {
			dst = append(dst, '0')
		}
		dst = append(dst, '.', '0')
	default:
		dst = append(dst, digits[:point]...)
		dst = append(dst, '.')
		dst = append(dst, digits[point:nd]...)
	}
	return dst
}
