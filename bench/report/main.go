// Command report turns the figures a `make bench` run recorded (JSON lines of tests/e2e's
// benchResult, one per figure) into bench/results/<date>.json, <date>.md (a table per benchmark,
// every figure beside its goal), SVG plots under <date>/ (rates, latency percentiles, memory, memory
// over time), and regenerates the README's section between <!-- bench:begin --> and
// <!-- bench:end --> from the latest results file. Without -results it only regenerates the README
// section.
//
// It leaves out running the benchmarks (bench/run.sh does) and judging goals: each figure's verdict
// comes with it from the benchmark that measured it.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	var opts options
	flag.StringVar(&opts.Results, "results", "", "JSON lines of the run's figures; empty: only regenerate the README from the latest results")
	flag.StringVar(&opts.Steps, "steps", "", "tab-separated lines `benchmark status seconds` written by bench/run.sh")
	flag.StringVar(&opts.Scale, "scale", "default", "the run's scale")
	flag.StringVar(&opts.Date, "date", time.Now().UTC().Format(dateLayout), "the run's date stamp, in file names")
	flag.StringVar(&opts.Commit, "commit", "", "the commit measured (default: git rev-parse --short HEAD)")
	flag.StringVar(&opts.Out, "out", "bench/results", "folder of the results")
	flag.StringVar(&opts.Readme, "readme", "README.md", "README whose bench section is regenerated; empty: leave it")
	flag.Parse()
	if opts.Commit == "" {
		opts.Commit = gitCommit()
	}
	opts.Machine = thisMachine()
	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}
