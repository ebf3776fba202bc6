package compiler

import (
	"fmt"
	"reflect"
	"unicode/utf8"
)

// The bounds below let the template string functions (printf, print, html,
// ...) refuse a call before fmt builds its result: fmt.Sprintf makes the whole
// string in memory first, so checking its length afterwards is too late
// (printf "%s%s…" $big $big … can ask for gigabytes in one call).
//
// A bound is never below what fmt produces. It walks the format the way
// fmt.(*pp).doPrintf does (flags, [n] argument indexes, widths and
// precisions, * taken from an argument, fmt's own cap on numbers) and adds,
// per verb, the size of its argument times what the verb can make of each
// byte, plus width, precision and a constant for every padded part (leaf).
//
// Only strings can be large and built by a template; other values (maps,
// structs, Stringers) come from the template's data, so measuring them by
// formatting them once is cheap.

// fmtLeafBound is the most fmt adds to one padded part beyond its width and
// precision: a number's digits (a float64 has up to 309 before the point),
// signs and prefixes, and annotations such as "%!d(MISSING)" or a type name.
const fmtLeafBound = 400

// fmtNodeLimit bounds the walk that counts the parts of a data value.
const fmtNodeLimit = 1 << 20

// fmtArgs sizes the arguments of one call, each once.
type fmtArgs struct {
	args  []any
	sizes []*argSize
}

// argSize is an argument's unpadded size and its number of padded parts.
type argSize struct {
	n      int  // bytes when printed with %v, %+v or %#v, whichever is longest
	leaves int  // parts that fmt pads to the width separately
	str    bool // a string: %q, %x and %#v can make up to 5 bytes of each byte
}

func newFmtArgs(args []any) *fmtArgs {
	return &fmtArgs{args: args, sizes: make([]*argSize, len(args))}
}

func (z *fmtArgs) size(i int) *argSize {
	if s := z.sizes[i]; s != nil {
		return s
	}
	s := sizeOf(z.args[i])
	z.sizes[i] = s
	return s
}

func sizeOf(a any) *argSize {
	switch x := a.(type) {
	case nil:
		return &argSize{leaves: 1}
	case string:
		return &argSize{n: len(x), leaves: 1, str: true}
	case bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, uintptr, float32, float64:
		return &argSize{leaves: 1}
	case complex64, complex128:
		return &argSize{leaves: 2}
	}
	n := max(len(fmt.Sprintf("%+v", a)), len(fmt.Sprintf("%#v", a)))
	budget := fmtNodeLimit
	leaves := max(1, countLeaves(reflect.ValueOf(a), 0, &budget))
	return &argSize{n: n, leaves: leaves}
}

// countLeaves counts the parts fmt pads separately when printing v: strings,
// numbers, bools and pointers below the top level, and the keys and elements
// of maps, slices, arrays and structs. It stops counting at fmtNodeLimit.
func countLeaves(v reflect.Value, depth int, budget *int) int {
	*budget--
	if *budget < 0 {
		return fmtNodeLimit
	}
	switch v.Kind() {
	case reflect.Invalid:
		return 1
	case reflect.Complex64, reflect.Complex128:
		return 2
	case reflect.Interface:
		if v.IsNil() {
			return 1
		}
		return countLeaves(v.Elem(), depth+1, budget)
	case reflect.Pointer:
		// fmt follows a pointer only at the top level (&{...}).
		if depth == 0 && !v.IsNil() {
			switch v.Elem().Kind() {
			case reflect.Array, reflect.Slice, reflect.Struct, reflect.Map:
				return 1 + countLeaves(v.Elem(), depth+1, budget)
			default:
			}
		}
		return 1
	case reflect.Map:
		n := 1
		it := v.MapRange()
		for it.Next() {
			n += countLeaves(it.Key(), depth+1, budget) + countLeaves(it.Value(), depth+1, budget)
			if *budget < 0 {
				return fmtNodeLimit
			}
		}
		return n
	case reflect.Slice, reflect.Array:
		n := 1
		for i := range v.Len() {
			n += countLeaves(v.Index(i), depth+1, budget)
			if *budget < 0 {
				return fmtNodeLimit
			}
		}
		return n
	case reflect.Struct:
		n := 1
		for i := range v.NumField() {
			n += countLeaves(v.Field(i), depth+1, budget)
			if *budget < 0 {
				return fmtNodeLimit
			}
		}
		return n
	default:
		return 1 // strings, numbers, bools, funcs, channels
	}
}

// verbCost bounds what one verb prints of argument i.
func (z *fmtArgs) verbCost(i int, verb rune, sharpV bool, wid, prec int) int {
	s := z.size(i)
	mult := 1
	switch {
	case verb == 'q' || verb == 'x' || verb == 'X':
		// %q escapes a byte as \xff (4) plus quotes; "% #x" prints 0x41 and a space (5).
		mult = 5
	case verb == 'v' && sharpV && s.str:
		mult = 5 // %#v quotes a string like %q
	}
	return s.n*mult + s.leaves*(wid+prec+fmtLeafBound)
}

// sprintfBound bounds len(fmt.Sprintf(format, args...)). It stops adding once
// the bound passes limit.
func sprintfBound(format string, args []any, limit int) int {
	z := newFmtArgs(args)
	total := 0
	end := len(format)
	argNum := 0
	reordered := false
	// anyArg bounds a verb whose argument is not known: any of them.
	maxN, maxLeaves := -1, 1
	anyArg := func(wid, prec int) int {
		if maxN < 0 {
			maxN = 0
			for j := range args {
				maxN, maxLeaves = max(maxN, z.size(j).n), max(maxLeaves, z.size(j).leaves)
			}
		}
		return 5*maxN + maxLeaves*(wid+prec+fmtLeafBound)
	}
	for i := 0; i < end && total <= limit; {
		lasti := i
		for i < end && format[i] != '%' {
			i++
		}
		total += i - lasti
		if i >= end {
			break
		}
		i++ // the '%'
		sharp := false
	flags:
		for ; i < end; i++ {
			switch format[i] {
			case '#':
				sharp = true
			case '0', '+', '-', ' ':
			default:
				break flags
			}
		}
		wid, prec := 0, 0
		afterIndex := false
		argNum, i, afterIndex, reordered = fmtArgNumber(argNum, format, i, len(args), reordered)
		if i < end && format[i] == '*' {
			i++
			var w int
			w, argNum = fmtIntFromArg(args, argNum)
			wid = abs(w)
			afterIndex = false
		} else {
			wid, _, i = fmtParsenum(format, i, end)
		}
		if i+1 < end && format[i] == '.' {
			i++
			argNum, i, afterIndex, reordered = fmtArgNumber(argNum, format, i, len(args), reordered)
			if i < end && format[i] == '*' {
				i++
				var p int
				p, argNum = fmtIntFromArg(args, argNum)
				prec = max(p, 0)
				afterIndex = false
			} else {
				prec, _, i = fmtParsenum(format, i, end)
			}
		}
		if !afterIndex {
			argNum, i, _, reordered = fmtArgNumber(argNum, format, i, len(args), reordered)
		}
		// Every verb may add an annotation (%!(BADWIDTH), %!(NOVERB), ...).
		total += fmtLeafBound
		if i >= end {
			break
		}
		verb, size := utf8.DecodeRuneInString(format[i:])
		i += size
		switch {
		case verb == '%':
		case reordered:
			// With [n] indexes the argument of a verb is not tracked
			// exactly; any argument may be the one.
			total += anyArg(wid, prec)
			argNum++
		case argNum >= len(args):
		default:
			total += z.verbCost(argNum, verb, sharp, wid, prec)
			argNum++
		}
	}
	if !reordered && argNum < len(args) {
		// %!(EXTRA type=value, ...)
		for j := argNum; j < len(args) && total <= limit; j++ {
			total += z.verbCost(j, 'v', false, 0, 0)
		}
	}
	return total
}

// sprintBound bounds len(fmt.Sprint(args...)) and, with newlines,
// len(fmt.Sprintln(args...)): every operand as %v and a separator.
func sprintBound(args []any, limit int) int {
	z := newFmtArgs(args)
	total := 1
	for j := range args {
		if total > limit {
			break
		}
		total += z.verbCost(j, 'v', false, 0, 0) + 1
	}
	return total
}

// escapeBound bounds the result of html, js or urlquery over args: they
// print args like print (a single string as is) and escape each byte into at
// most mult bytes.
func escapeBound(args []any, mult, limit int) int {
	if len(args) == 1 {
		if s, ok := args[0].(string); ok {
			return len(s) * mult
		}
	}
	deref := make([]any, len(args))
	for i, a := range args {
		deref[i] = indirectArg(a)
	}
	return sprintBound(deref, limit) * mult
}

// indirectArg follows pointers the way text/template does before printing an
// argument of html, js or urlquery.
func indirectArg(a any) any {
	if a == nil {
		return nil
	}
	v := reflect.ValueOf(a)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		if _, ok := v.Interface().(fmt.Stringer); ok {
			break
		}
		if _, ok := v.Interface().(error); ok {
			break
		}
		v = v.Elem()
	}
	if !v.CanInterface() {
		return a
	}
	return v.Interface()
}

// fmtParsenum is fmt's parsenum: a number of at most about 1e7; a longer one
// ends the format.
func fmtParsenum(s string, start, end int) (num int, isnum bool, newi int) {
	if start >= end {
		return 0, false, end
	}
	for newi = start; newi < end && '0' <= s[newi] && s[newi] <= '9'; newi++ {
		if num > 1e6 {
			return 0, false, end
		}
		num = num*10 + int(s[newi]-'0')
		isnum = true
	}
	return num, isnum, newi
}

// fmtArgNumber is fmt's argNumber: an explicit argument index [n] at i.
func fmtArgNumber(argNum int, format string, i, numArgs int, reordered bool) (newArgNum, newi int, found, reord bool) {
	if len(format) <= i || format[i] != '[' {
		return argNum, i, false, reordered
	}
	f := format[i:]
	if len(f) < 3 {
		return argNum, i + 1, false, true
	}
	for j := 1; j < len(f); j++ {
		if f[j] == ']' {
			n, ok, newj := fmtParsenum(f, 1, j)
			if !ok || newj != j {
				return argNum, i + j + 1, false, true
			}
			if idx := n - 1; idx >= 0 && idx < numArgs {
				return idx, i + j + 1, true, true
			}
			return argNum, i + j + 1, true, true
		}
	}
	return argNum, i + 1, false, true
}

// fmtIntFromArg is fmt's intFromArg: a width or precision taken from an
// argument, 0 when it is not an integer of at most 1e6.
func fmtIntFromArg(args []any, argNum int) (num, newArgNum int) {
	if argNum >= len(args) {
		return 0, argNum
	}
	v := reflect.ValueOf(args[argNum])
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if n := v.Int(); n >= -1e6 && n <= 1e6 {
			num = int(n)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if n := v.Uint(); n <= 1e6 {
			num = int(n)
		}
	default: // not an integer: fmt prints %!(BADWIDTH)
	}
	return num, argNum + 1
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
