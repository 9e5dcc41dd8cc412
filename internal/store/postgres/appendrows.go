package postgres

import (
	"strconv"
	"strings"
)

// An append's statement reads each table's rows (its events, its docs of
// one kind) from arrays, one a column, in a form chosen by their number:
// unnest of k arrays is k set-returning functions for the server to set up,
// run and end at each run, a good part of an agent step's append (7 arrays
// for its events, 4 for each of its docs). A subscript is cheaper where the
// arrays are short, but reaches a text element by walking the ones before
// it, so long arrays keep unnest. A single row (a step's turn, effect and
// checkpoint are one each) is sent as its values, not as arrays of one:
// nothing for the driver to encode or the server to receive as an array,
// no function, no subscript.

// rowsForm is how a statement reads one table's rows from its arrays.
type rowsForm int

const (
	noRows   rowsForm = iota // a doc kind the append does not write
	oneRow                   // the row's values, sent as scalars
	fewRows                  // by subscript, from one generate_subscripts series
	manyRows                 // unnested together
)

// maxSubscriptedRows is the most rows of one table read by subscript.
const maxSubscriptedRows = 32

// formFor returns the form for n rows.
func formFor(n int) rowsForm {
	switch {
	case n == 0:
		return noRows
	case n == 1:
		return oneRow
	case n <= maxSubscriptedRows:
		return fewRows
	}
	return manyRows
}

// rowsFrom returns, for a table's arrays (parameters cast to array types,
// "$13::bigint[]", all of one length), the expression of each array's
// element in a row, in the arrays' order, and the FROM clause of the rows.
// For one row the parameters are the values themselves, cast to the
// elements' types ("$13::bigint"), and there is no FROM clause.
func rowsFrom(form rowsForm, arrays []string) (cols []string, from string) {
	cols = make([]string, len(arrays))
	switch form {
	case oneRow:
		for k, a := range arrays {
			cols[k] = strings.TrimSuffix(a, "[]")
		}
	case fewRows:
		from = " FROM generate_subscripts(" + arrays[0] + ", 1) AS i"
		for k, a := range arrays {
			cols[k] = "(" + a + ")[i]"
		}
	default:
		names := make([]string, len(arrays))
		for k := range arrays {
			names[k] = "c" + strconv.Itoa(k)
			cols[k] = "u." + names[k]
		}
		from = " FROM unnest(" + strings.Join(arrays, ", ") + ") AS u(" + strings.Join(names, ", ") + ")"
	}
	return cols, from
}

// rowCount is the SQL of the number of rows a table of form was given.
func rowCount(form rowsForm, arrays []string) string {
	if form == oneRow {
		return "1"
	}
	return "cardinality(" + arrays[0] + ")"
}
