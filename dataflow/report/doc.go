// Package report holds what a run reports, the same for every executor: the
// summary (`--summary json`), the bill of each crash and the accumulator the
// executors feed it through, the lost-piece figures, the progress event
// writer with its one line schema, and the progress history a summary folds
// in. Executors write to it; nothing in it is read back into job state, so
// recovery never depends on a measurement.
package report
