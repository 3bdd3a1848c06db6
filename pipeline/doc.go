// Package pipeline builds one index file from rows: Run takes a Job
// through its stages (plan: checks, code, devices and sample size; train:
// the annealing loop on every row that fits, or on a sample, or a model's
// anchors; assign: every row to the anchors where training saw a sample;
// write: encode and write the file atomically), each handing a value to
// the next. OpenInput reads an input file as a Source, DocumentSource
// documents held in memory.
package pipeline
