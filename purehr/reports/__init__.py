"""Reports of finished runs: analysis, the results table, the end-of-run summary, publishing a
record, and the statistics they share."""
