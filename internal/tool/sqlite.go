package tool

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
	"modernc.org/sqlite/vfs"

	"github.com/longhaul-dev/longhaul/internal/workspace"
	lt "github.com/longhaul-dev/longhaul/longhaultype"
)

// sqlite_query limits.
const (
	// DefaultSQLiteRows is how many rows sqlite_query returns when the call
	// gives no max_rows; MaxSQLiteRows is the most it accepts.
	DefaultSQLiteRows = 100
	MaxSQLiteRows     = 1000
	// DefaultSQLiteOutputBytes bounds the JSON size of the rows returned
	// when the call has no MaxOutputBytes.
	DefaultSQLiteOutputBytes = 256 << 10
	// DefaultSQLiteTimeout bounds a query when the call has no Timeout.
	DefaultSQLiteTimeout = 30 * time.Second
	// sqliteValueBytes is the most text (or base64) returned of one value;
	// longer values are cut and marked, so that one huge cell cannot crowd
	// out every row.
	sqliteValueBytes = 16 << 10
	// sqliteMaxLength caps a string or BLOB SQLite will build or read
	// (SQLITE_LIMIT_LENGTH, 1e9 by default), which bounds the memory one
	// value of a hostile database can take on the server.
	sqliteMaxLength = 64 << 20
)

var sqliteQuerySchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "database": {"type": "string", "minLength": 1, "description": "Path of the SQLite database file, relative to the workspace."},
    "sql": {"type": "string", "minLength": 1, "description": "One read-only statement: SELECT, WITH ... SELECT, VALUES, EXPLAIN, or a PRAGMA that reads (table_info, index_list, ...). Use ? placeholders for values."},
    "params": {
      "type": "array",
      "maxItems": 999,
      "description": "Values for the ? placeholders, in order. A BLOB is written {\"base64\": \"...\"}.",
      "items": {"anyOf": [
        {"type": ["string", "number", "boolean", "null"]},
        {"type": "object", "properties": {"base64": {"type": "string"}}, "required": ["base64"], "additionalProperties": false}
      ]}
    },
    "max_rows": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Most rows to return (default 100)."}
  },
  "required": ["database", "sql"],
  "additionalProperties": false
}`)

// SQLiteQuery is the sqlite_query built-in: one read-only SQL statement on
// a SQLite database file of the workspace, returning only the rows asked
// for, so that large data never has to pass through the model's context
// whole. The zero value is ready to use.
//
// The database is always opened read-only, whatever the agent: through a
// read-only SQLite VFS whose every file access goes through an os.Root on
// the workspace (so neither "..", an absolute path nor a symlink can reach
// a file outside it, even if the workspace changes during the query), with
// query_only set, ATTACH impossible (it could name any host file by URI),
// and an authorizer that admits reading statements only. A write attempt
// is a tool error the model reads. Each query is interrupted when the call's
// timeout (default 30 s) expires.
type SQLiteQuery struct{}

// SQLiteQueryOutput is the output of sqlite_query.
type SQLiteQueryOutput struct {
	Columns []string `json:"columns"`
	// Rows hold JSON values: numbers, strings, null; a BLOB is
	// {"base64": "...", "bytes": N}; text longer than 16 KiB is
	// {"text": "<first 16 KiB>", "bytes": N, "truncated": true}.
	Rows     [][]any `json:"rows"`
	RowCount int     `json:"row_count"`
	// Truncated is true when the statement had more rows than returned;
	// TruncatedBy says which limit stopped it: "max_rows" or "bytes".
	Truncated   bool   `json:"truncated"`
	TruncatedBy string `json:"truncated_by,omitempty"`
}

// Name implements Tool.
func (*SQLiteQuery) Name() string { return "sqlite_query" }

// Description implements Tool.
func (*SQLiteQuery) Description() string {
	return "Run one read-only SQL statement on a SQLite database file of the workspace and get its rows " +
		"(at most max_rows, default 100, and about 256 KiB). Use it to explore large data with SQL " +
		"(COUNT, GROUP BY, LIMIT/OFFSET, substr) instead of reading whole files. " +
		"BLOBs come back as {\"base64\": ...}; long text is cut (use substr to page through it)."
}

// Parameters implements Tool.
func (*SQLiteQuery) Parameters() json.RawMessage { return clone(sqliteQuerySchema) }

// Effect implements Tool.
func (*SQLiteQuery) Effect() lt.EffectClass { return lt.EffectRead }

// Run implements Tool.
func (t *SQLiteQuery) Run(ctx context.Context, call *Call) (*Result, error) {
	var args struct {
		Database string            `json:"database"`
		SQL      string            `json:"sql"`
		Params   []json.RawMessage `json:"params"`
		MaxRows  json.Number       `json:"max_rows"`
	}
	if res := decodeArguments(t, call, &args); res != nil {
		return res, nil
	}
	maxRows := int64(DefaultSQLiteRows)
	if args.MaxRows != "" {
		v, err := intArgument("max_rows", args.MaxRows)
		if err != nil {
			return &Result{Error: err.Error()}, nil
		}
		maxRows = v
	}
	req := &SQLiteRequest{Database: args.Database, SQL: args.SQL, Params: args.Params, MaxRows: int(maxRows),
		MaxBytes: DefaultSQLiteOutputBytes, Timeout: DefaultSQLiteTimeout}
	if call.MaxOutputBytes > 0 {
		req.MaxBytes = min(req.MaxBytes, call.MaxOutputBytes)
	}
	if call.Timeout > 0 {
		req.Timeout = call.Timeout
	}
	if call.SQLite != nil {
		// The workspace is where the session's environment is (a
		// runner): the query runs there, under the same checks.
		ans, err := call.SQLite.SQLiteQuery(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrEnvironment, err)
		}
		if ans.Error != "" {
			return &Result{Error: ans.Error}, nil
		}
		return &Result{Output: ans.Output}, nil
	}
	if call.Workspace == "" {
		return nil, errors.New("open workspace: call has no workspace")
	}
	return RunSQLite(ctx, call.Workspace, req)
}

// SQLiteRequest is one sqlite_query as the place the workspace lives runs
// it (RunSQLite). Every field is checked again there: a request that
// crossed a link is not trusted more than the model's arguments.
type SQLiteRequest struct {
	Database string            `json:"database"`
	SQL      string            `json:"sql"`
	Params   []json.RawMessage `json:"params,omitempty"`
	// MaxRows (at most MaxSQLiteRows), MaxBytes (at most
	// DefaultSQLiteOutputBytes) and Timeout (at most MaxSQLiteTimeout)
	// bound the answer.
	MaxRows  int           `json:"max_rows"`
	MaxBytes int           `json:"max_bytes"`
	Timeout  time.Duration `json:"timeout"`
}

// maxBytes is the output budget req asks for, within its bounds.
func (req *SQLiteRequest) maxBytes() int {
	if req.MaxBytes <= 0 || req.MaxBytes > DefaultSQLiteOutputBytes {
		return DefaultSQLiteOutputBytes
	}
	return req.MaxBytes
}

// BoundSQLiteAnswer holds an answer that came from elsewhere (a runner,
// not trusted more than the model) to req's limits, as RunSQLite would
// have: rows past MaxRows or past the byte budget are cut and the output
// marked truncated by that limit; an error or columns that alone exceed
// the budget are refused as an error of the answer.
func BoundSQLiteAnswer(req *SQLiteRequest, ans *SQLiteAnswer) *SQLiteAnswer {
	maxBytes := req.maxBytes()
	if len(ans.Error) > maxBytes {
		return &SQLiteAnswer{Error: fmt.Sprintf("the answer's error is larger than %d bytes", maxBytes)}
	}
	out := ans.Output
	if out == nil {
		return ans
	}
	maxRows := min(max(req.MaxRows, 1), MaxSQLiteRows)
	envelope, err := json.Marshal(&SQLiteQueryOutput{Columns: out.Columns, Rows: [][]any{}, RowCount: maxRows, Truncated: true, TruncatedBy: "max_rows"})
	if err != nil || len(envelope) > maxBytes {
		return &SQLiteAnswer{Error: fmt.Sprintf("the answer's columns are larger than %d bytes", maxBytes)}
	}
	bounded := &SQLiteQueryOutput{Columns: out.Columns, Rows: [][]any{}, Truncated: out.Truncated, TruncatedBy: out.TruncatedBy}
	used := len(envelope)
	for _, row := range out.Rows {
		if len(bounded.Rows) == maxRows {
			bounded.Truncated, bounded.TruncatedBy = true, "max_rows"
			break
		}
		enc, err := json.Marshal(row)
		if err != nil || used+len(enc)+1 > maxBytes {
			bounded.Truncated, bounded.TruncatedBy = true, "bytes"
			break
		}
		used += len(enc) + 1
		bounded.Rows = append(bounded.Rows, row)
	}
	bounded.RowCount = len(bounded.Rows)
	return &SQLiteAnswer{Output: bounded}
}

// MaxSQLiteTimeout bounds the timeout a SQLiteRequest may ask for.
const MaxSQLiteTimeout = 10 * time.Minute

// SQLiteAnswer is what a SQLite gives back: the rows, or an error for the
// model.
type SQLiteAnswer struct {
	Output *SQLiteQueryOutput `json:"output,omitempty"`
	Error  string             `json:"error,omitempty"`
}

// SQLite runs sqlite_query where the session's workspace lives (its
// Environment; a remote one sends it to its runner). An error is the
// environment's failure, never the query's (SQLiteAnswer.Error).
type SQLite interface {
	SQLiteQuery(ctx context.Context, req *SQLiteRequest) (*SQLiteAnswer, error)
}

// SQLiteAnswerOf is RunSQLite's outcome as a SQLite gives it back.
func SQLiteAnswerOf(res *Result, err error) (*SQLiteAnswer, error) {
	if err != nil {
		return nil, err
	}
	out, _ := res.Output.(*SQLiteQueryOutput)
	return &SQLiteAnswer{Output: out, Error: res.Error}, nil
}

// RunSQLite runs req on the workspace directory ws, read-only, within its
// limits. Problems of the query are Results for the model.
func RunSQLite(ctx context.Context, ws string, req *SQLiteRequest) (*Result, error) {
	if req.MaxRows < 1 || req.MaxRows > MaxSQLiteRows {
		return &Result{Error: fmt.Sprintf("arguments.max_rows: must be between 1 and %d", MaxSQLiteRows)}, nil
	}
	maxBytes := req.maxBytes()
	timeout := req.Timeout
	if timeout <= 0 || timeout > MaxSQLiteTimeout {
		timeout = DefaultSQLiteTimeout
	}
	params, err := sqliteParams(req.Params)
	if err != nil {
		return &Result{Error: err.Error()}, nil
	}
	if strings.IndexByte(req.SQL, 0) >= 0 {
		return &Result{Error: "arguments.sql: contains a NUL byte"}, nil
	}
	if !singleStatement(req.SQL) {
		return &Result{Error: "arguments.sql: must be one statement; run each statement in its own call"}, nil
	}
	rel, res, err := checkDatabase(ws, req.Database)
	if res != nil || err != nil {
		return res, err
	}
	return runSQLiteQuery(ctx, ws, rel, req.SQL, params, req.MaxRows, maxBytes, timeout)
}

// sqliteParams converts the params argument (checked by the schema) into
// driver values.
func sqliteParams(raw []json.RawMessage) ([]any, error) {
	out := make([]any, len(raw))
	for i, r := range raw {
		field := fmt.Sprintf("params[%d]", i)
		var v any
		dec := json.NewDecoder(strings.NewReader(string(r)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, &FieldError{Field: docArguments + "." + field, Message: err.Error()}
		}
		switch x := v.(type) {
		case nil, string:
			out[i] = x
		case bool:
			out[i] = x
		case json.Number:
			if n, err := x.Int64(); err == nil {
				out[i] = n
				continue
			}
			f, err := x.Float64()
			if err != nil || math.IsInf(f, 0) {
				return nil, &FieldError{Field: docArguments + "." + field, Message: "is not a representable number"}
			}
			out[i] = f
		case map[string]any:
			s, _ := x["base64"].(string)
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, &FieldError{Field: docArguments + "." + field + ".base64", Message: "is not valid base64"}
			}
			out[i] = b
		default:
			return nil, &FieldError{Field: docArguments + "." + field, Message: "must be a string, number, boolean, null or {\"base64\": ...}"}
		}
	}
	return out, nil
}

// checkDatabase resolves the database argument inside the workspace and
// checks that it is a regular file with a SQLite header (or empty, which
// SQLite reads as an empty database). Problems are Results for the model.
func checkDatabase(ws, database string) (string, *Result, error) {
	rel, err := workspace.CleanPath(database)
	if err != nil {
		return "", &Result{Error: "arguments.database: " + err.Error()}, nil
	}
	if rel == "." {
		return "", &Result{Error: "arguments.database: names the workspace directory, not a database file"}, nil
	}
	d, err := workspace.Open(ws)
	if err != nil {
		return "", nil, fmt.Errorf("open workspace: %w", err)
	}
	defer d.Close()
	// workspace.Dir resolves through os.Root: a path or symlink that
	// leads outside is refused here with a clear message. The query itself
	// opens the file through another os.Root, so a swap after this check
	// cannot lead outside either.
	head, err := d.ReadFile(rel, 0, 100)
	if err != nil {
		return "", &Result{Error: "database: " + err.Error()}, nil
	}
	if head.Size > 0 && (len(head.Data) < 16 || string(head.Data[:16]) != "SQLite format 3\x00") {
		return "", &Result{Error: fmt.Sprintf("database %q is not a SQLite database (it does not start with the SQLite header)", database)}, nil
	}
	return filepath.ToSlash(rel), nil, nil
}

// runSQLiteQuery opens the database read-only through a VFS confined to the
// workspace and runs the statement.
func runSQLiteQuery(ctx context.Context, ws, rel, query string, params []any, maxRows, maxBytes int, timeout time.Duration) (*Result, error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	vfsName, fsys, err := vfs.New(root.FS())
	if err != nil {
		return nil, fmt.Errorf("register workspace vfs: %w", err)
	}
	defer fsys.Close() // after db.Close below: deferred calls run last first

	// A URI filename: the path is percent-encoded so that "?", "#" and "%"
	// in a file name stay part of it. locking_mode(EXCLUSIVE) lets SQLite
	// read a WAL database without shared memory, which the read-only VFS
	// lacks; temp_store(MEMORY) keeps sorts off the VFS, which cannot
	// create temporary files; trusted_schema(0) keeps functions named in a
	// hostile schema from running with side effects.
	dsn := "file:" + (&url.URL{Path: rel}).EscapedPath() + "?" + url.Values{
		"vfs":        {vfsName},
		"mode":       {"ro"},
		"_defensive": {"1"},
		"_pragma": {
			"query_only(1)", "locking_mode(EXCLUSIVE)", "temp_store(MEMORY)", "trusted_schema(0)",
		},
	}.Encode()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %q: %w", rel, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)

	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := db.Conn(qctx)
	if err != nil {
		return queryError(ctx, qctx, rel, timeout, err)
	}
	defer conn.Close()
	if err := lockDown(conn); err != nil {
		return nil, fmt.Errorf("open database %q: %w", rel, err)
	}

	rows, err := conn.QueryContext(qctx, query, params...)
	if err != nil {
		return queryError(ctx, qctx, rel, timeout, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return queryError(ctx, qctx, rel, timeout, err)
	}
	out := &SQLiteQueryOutput{Columns: cols, Rows: [][]any{}}
	// The envelope (column names, counters at their largest) counts
	// against the budget too, so the whole output stays within it.
	envelope, err := json.Marshal(&SQLiteQueryOutput{Columns: cols, Rows: [][]any{}, RowCount: maxRows, Truncated: true, TruncatedBy: "max_rows"})
	if err != nil {
		return nil, fmt.Errorf("encode columns: %w", err)
	}
	used := len(envelope)
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(out.Rows) == maxRows {
			out.Truncated, out.TruncatedBy = true, "max_rows"
			break
		}
		if err := rows.Scan(ptrs...); err != nil {
			return queryError(ctx, qctx, rel, timeout, err)
		}
		row := make([]any, len(vals))
		for i, v := range vals {
			row[i] = jsonValue(v)
		}
		enc, err := json.Marshal(row)
		if err != nil {
			return nil, fmt.Errorf("encode row: %w", err)
		}
		if used+len(enc)+1 > maxBytes {
			out.Truncated, out.TruncatedBy = true, "bytes"
			break
		}
		used += len(enc) + 1
		out.Rows = append(out.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return queryError(ctx, qctx, rel, timeout, err)
	}
	out.RowCount = len(out.Rows)
	return &Result{Output: out}, nil
}

// lockDown makes the connection unable to reach any other file and to run
// anything but reads.
func lockDown(conn *sql.Conn) error {
	if _, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_ATTACHED, 0); err != nil {
		return fmt.Errorf("limit attached databases: %w", err)
	}
	if _, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_LENGTH, sqliteMaxLength); err != nil {
		return fmt.Errorf("limit value length: %w", err)
	}
	return conn.Raw(func(dc any) error {
		r, ok := dc.(sqlite.AuthorizerRegisterer)
		if !ok {
			return fmt.Errorf("driver connection %T has no authorizer", dc)
		}
		return r.RegisterAuthorizer(readOnlyAuthorizer)
	})
}

// Pragmas the authorizer admits: those that only report, with a table or
// index name as argument (nameArgPragmas) or none (readPragmas; with an
// argument these would set something).
var (
	nameArgPragmas = map[string]bool{
		"table_info": true, "table_xinfo": true, "index_list": true, "index_info": true, "index_xinfo": true,
		"foreign_key_list": true, "foreign_key_check": true, "integrity_check": true, "quick_check": true,
	}
	readPragmas = map[string]bool{
		"table_list": true, "database_list": true, "collation_list": true, "function_list": true,
		"module_list": true, "pragma_list": true, "compile_options": true, "user_version": true,
		"application_id": true, "schema_version": true, "data_version": true, "page_count": true,
		"page_size": true, "freelist_count": true, "encoding": true, "journal_mode": true, "auto_vacuum": true,
	}
	deniedFunctions = map[string]bool{
		"load_extension": true, "readfile": true, "writefile": true, "edit": true, "fts3_tokenizer": true,
	}
)

// readOnlyAuthorizer admits the actions of reading statements and nothing
// else: no writes, schema changes, transactions, ATTACH or pragma settings.
func readOnlyAuthorizer(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
	switch action {
	case sqlite.AuthSelect, sqlite.AuthRead, sqlite.AuthRecursive:
		return sqlite.AuthorizerOK
	case sqlite.AuthFunction:
		if deniedFunctions[strings.ToLower(arg2)] {
			return sqlite.AuthorizerDeny
		}
		return sqlite.AuthorizerOK
	case sqlite.AuthPragma:
		name := strings.ToLower(arg1)
		if nameArgPragmas[name] || (readPragmas[name] && arg2 == "") {
			return sqlite.AuthorizerOK
		}
	}
	return sqlite.AuthorizerDeny
}

// queryError turns a failed query into the Result the model reads, or a Go
// error when the call itself was cancelled.
func queryError(ctx, qctx context.Context, rel string, timeout time.Duration, err error) (*Result, error) {
	switch {
	case ctx.Err() != nil:
		return nil, context.Cause(ctx)
	case qctx.Err() != nil:
		return &Result{Error: fmt.Sprintf("query timed out after %s and was interrupted; make it cheaper (a LIMIT, an indexed WHERE)", formatSeconds(timeout))}, nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_AUTH:
			return &Result{Error: "query refused: the database is read-only; only SELECT, WITH ... SELECT, VALUES, EXPLAIN and pragmas that read are allowed"}, nil
		case sqlite3.SQLITE_READONLY:
			return &Result{Error: "query refused: the database is read-only (" + se.Error() + ")"}, nil
		case sqlite3.SQLITE_NOTADB:
			return &Result{Error: fmt.Sprintf("database %q is not a SQLite database", rel)}, nil
		}
	}
	return &Result{Error: "query: " + err.Error()}, nil
}

// jsonValue turns a value scanned from SQLite into one JSON can carry.
func jsonValue(v any) any {
	switch x := v.(type) {
	case nil, int64, bool:
		return x
	case float64:
		switch {
		case math.IsInf(x, 1):
			return "Infinity"
		case math.IsInf(x, -1):
			return "-Infinity"
		case math.IsNaN(x):
			return "NaN"
		}
		return x
	case string:
		if len(x) <= sqliteValueBytes && utf8.ValidString(x) {
			return x
		}
		if !utf8.ValidString(x) {
			// Text that is not UTF-8 would be mangled by JSON: give the
			// bytes, like a BLOB.
			return blobValue([]byte(x))
		}
		cut := x[:sqliteValueBytes]
		for len(cut) > 0 && !utf8.ValidString(cut) {
			cut = cut[:len(cut)-1]
		}
		return map[string]any{"text": cut, "bytes": len(x), "truncated": true}
	case []byte:
		return blobValue(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	default:
		return fmt.Sprint(x)
	}
}

// blobValue is the marked base64 form of a BLOB, cut to the value limit.
func blobValue(b []byte) map[string]any {
	maxRaw := sqliteValueBytes / 4 * 3
	if len(b) <= maxRaw {
		return map[string]any{"base64": base64.StdEncoding.EncodeToString(b), "bytes": len(b)}
	}
	return map[string]any{"base64": base64.StdEncoding.EncodeToString(b[:maxRaw]), "bytes": len(b), "truncated": true}
}

// singleStatement reports whether query holds at most one statement: after
// the first ";" outside string literals, quoted identifiers and comments,
// only whitespace, comments and ";" may follow. A misjudgement is harmless
// (every statement is still read-only); it only keeps the contract clear.
func singleStatement(query string) bool {
	end := -1
	for i := 0; i < len(query) && end < 0; i++ {
		switch c := query[i]; c {
		case '\'', '"', '`':
			i = skipQuoted(query, i, c)
		case '[':
			i = skipQuoted(query, i, ']')
		case '-':
			if i+1 < len(query) && query[i+1] == '-' {
				i = skipLineComment(query, i)
			}
		case '/':
			if i+1 < len(query) && query[i+1] == '*' {
				i = skipBlockComment(query, i)
			}
		case ';':
			end = i
		}
	}
	if end < 0 {
		return true
	}
	for i := end + 1; i < len(query); i++ {
		switch c := query[i]; {
		case c == ';' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			i = skipLineComment(query, i)
		case c == '/' && i+1 < len(query) && query[i+1] == '*':
			i = skipBlockComment(query, i)
		default:
			return false
		}
	}
	return true
}

// skipQuoted returns the index of the quote closing the literal that
// starts at i ("" inside doubles it); len(s) if it is not closed.
func skipQuoted(s string, i int, closing byte) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == closing {
			if closing != ']' && j+1 < len(s) && s[j+1] == closing {
				j++
				continue
			}
			return j
		}
	}
	return len(s)
}

func skipLineComment(s string, i int) int {
	if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
		return i + j
	}
	return len(s)
}

func skipBlockComment(s string, i int) int {
	if j := strings.Index(s[i+2:], "*/"); j >= 0 {
		return i + 2 + j + 1
	}
	return len(s)
}
