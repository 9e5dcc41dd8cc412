package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
)

type options struct {
	repo, url               string
	peers                   []string
	rounds                  int
	steps, serial, parallel int
}

func main() {
	var o options
	var peers string
	flag.StringVar(&o.repo, "repo", filepath.Join("..", ".."), "the Longhaul repository, whose cmd/longhaul is built and measured")
	flag.StringVar(&o.url, "url", os.Getenv("LONGHAUL_TEST_POSTGRES"), "postgres:// URL of a database every system may create a schema in (default: $LONGHAUL_TEST_POSTGRES; empty: skip PostgreSQL)")
	flag.StringVar(&peers, "peers", "dbos,river", "the peers to run, comma-separated: dbos, river")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; each runs Longhaul then every peer, on each store")
	flag.IntVar(&o.steps, "steps", 10, "agent steps per session")
	flag.IntVar(&o.serial, "serial", 30, "sessions run one after another in the serial run")
	flag.IntVar(&o.parallel, "concurrent", 64, "sessions run at once in the concurrent run")
	flag.Parse()
	o.peers = strings.Split(peers, ",")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func (o *options) validate() error {
	for _, p := range o.peers {
		if p != "dbos" && p != "river" {
			return fmt.Errorf("--peers: %q is not dbos or river", p)
		}
	}
	switch {
	case o.rounds < 1:
		return fmt.Errorf("--rounds %d: want 1 or more", o.rounds)
	case o.steps < 1 || o.serial < 1 || o.parallel < 1:
		return errors.New("--steps, --serial and --concurrent: want 1 or more")
	case o.url != "" && !strings.HasPrefix(o.url, "postgres://") && !strings.HasPrefix(o.url, "postgresql://"):
		return errors.New("--url: want a postgres:// or postgresql:// URL (the value is not shown: it may hold a password)")
	}
	return nil
}

// A measurement is one system's agent-steps/s in the serial and in the
// concurrent run of one round on one store.
type measurement struct{ serial, concurrent float64 }

func run(ctx context.Context, w io.Writer, o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	bin, err := os.MkdirTemp("", "longhaul-compare-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	longhaul, peers := filepath.Join(bin, "longhaul"), filepath.Join(bin, "peers")
	if err := command(ctx, o.repo, "go", "build", "-o", longhaul, "./cmd/longhaul").Run(); err != nil {
		return fmt.Errorf("build longhaul: %w", err)
	}
	if err := command(ctx, ".", "go", "build", "-o", peers, ".").Run(); err != nil {
		return fmt.Errorf("build the peers (run compare from bench/peers): %w", err)
	}
	stores := []string{"sqlite"}
	if o.url != "" {
		stores = append(stores, "postgres")
		settings, err := postgresDurability(ctx, o.url)
		if err != nil {
			return err
		}
		fmt.Fprintln(w, settings)
	}
	systems := append([]string{"longhaul"}, o.peers...)
	// samples[store][system] holds one measurement per round.
	samples := map[string]map[string][]measurement{}
	for _, st := range stores {
		samples[st] = map[string][]measurement{}
	}
	for round := 1; round <= o.rounds; round++ {
		for _, st := range stores {
			for _, sys := range systems {
				args := []string{"--steps", strconv.Itoa(o.steps), "--rounds", strconv.Itoa(o.serial), "--concurrent", strconv.Itoa(o.parallel)}
				name := longhaul
				if sys == "longhaul" {
					args = append([]string{"bench", "--waiting", "0", "--control", "0"}, args...)
					if st == "postgres" {
						args = append(args, "--store", o.url)
					}
				} else {
					name = peers
					args = append(args, "--system", sys, "--store", st)
					if st == "postgres" {
						args = append(args, "--url", o.url)
					}
				}
				m, err := measure(ctx, name, args)
				if err != nil {
					return fmt.Errorf("round %d, %s on %s: %w", round, sys, st, err)
				}
				fmt.Fprintf(w, "round %d  %-8s %-8s serial %6.0f  concurrent %6.0f agent-steps/s\n", round, st, sys, m.serial, m.concurrent)
				samples[st][sys] = append(samples[st][sys], m)
			}
		}
	}
	fmt.Fprintf(w, "\nmedians of %d rounds (%d steps a session; serial: %d sessions one at a time; concurrent: %d at once, twice); ratio = Longhaul ÷ peer, the median of the rounds' ratios\n\n",
		o.rounds, o.steps, o.serial, o.parallel)
	printSummary(w, stores, o.peers, samples)
	return nil
}

// postgresDurability reports the server's durability settings, and warns
// when fsync is off: its commits then cost no flush, and the PostgreSQL
// figures say nothing of a durable run.
func postgresDurability(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var version, fsync, syncCommit string
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit')").Scan(&version, &fsync, &syncCommit); err != nil {
		return "", fmt.Errorf("read PostgreSQL's settings: %w", err)
	}
	out := fmt.Sprintf("PostgreSQL %s: fsync=%s, synchronous_commit=%s", version, fsync, syncCommit)
	if fsync != "on" || syncCommit != "on" {
		out += "\nwarning: this server does not flush its commits: the PostgreSQL runs are not durable, unlike a deployment's"
	}
	return out, nil
}

func command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, os.Stderr, os.Stderr
	return cmd
}

// measure runs a benchmark command and reads the agent-steps/s of its
// table's two rows, the serial run then the concurrent one.
func measure(ctx context.Context, name string, args []string) (measurement, error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return measurement{}, fmt.Errorf("%w: %s", err, strings.TrimSpace(errOut.String()))
	}
	rates, err := parseRates(out.String())
	if err != nil {
		return measurement{}, err
	}
	return measurement{serial: rates[0], concurrent: rates[1]}, nil
}

// parseRates reads the agent-steps/s column of the rows under the table's
// header, as `longhaul bench` and the peers print it.
func parseRates(out string) ([]float64, error) {
	var rates []float64
	col := -1
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if i := slices.Index(f, "agent-steps/s"); i >= 0 {
			col = i
			continue
		}
		if col < 0 || len(f) <= col {
			if col >= 0 {
				break // the table's end
			}
			continue
		}
		v, err := strconv.ParseFloat(f[col], 64)
		if err != nil {
			return nil, fmt.Errorf("agent-steps/s %q: %w", f[col], err)
		}
		rates = append(rates, v)
	}
	if len(rates) < 2 {
		return nil, fmt.Errorf("want a serial and a concurrent row in the output, got %d rows:\n%s", len(rates), out)
	}
	return rates, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printSummary(w io.Writer, stores, peers []string, samples map[string]map[string][]measurement) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "run\tLonghaul agent-steps/s"
	for _, p := range peers {
		header += fmt.Sprintf("\t%s\tratio", peerTitle(p))
	}
	fmt.Fprintln(tw, header+"\t")
	for _, st := range stores {
		for _, concurrent := range []bool{false, true} {
			pick := func(m measurement) float64 {
				if concurrent {
					return m.concurrent
				}
				return m.serial
			}
			rates := func(sys string) []float64 {
				var out []float64
				for _, m := range samples[st][sys] {
					out = append(out, pick(m))
				}
				return out
			}
			lh := rates("longhaul")
			row := fmt.Sprintf("%s\t%.0f", runTitle(st, concurrent), median(lh))
			for _, p := range peers {
				pr := rates(p)
				ratios := make([]float64, len(pr))
				for i := range pr {
					ratios[i] = lh[i] / pr[i]
				}
				row += fmt.Sprintf("\t%.0f\t%.2f×", median(pr), median(ratios))
			}
			fmt.Fprintln(tw, row+"\t")
		}
	}
	tw.Flush()
}

func peerTitle(p string) string {
	if p == "dbos" {
		return "DBOS"
	}
	return "River"
}

func runTitle(store string, concurrent bool) string {
	name := "SQLite synchronous=FULL"
	if store == "postgres" {
		name = "PostgreSQL"
	}
	if concurrent {
		return name + ", concurrent"
	}
	return name + ", serial"
}
