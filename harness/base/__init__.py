"""The ground floor: what every part of the harness stands on and that knows no data type (errors and exit
statuses, file writes and their fault hooks, output sets and destinations, worker threads and read-ahead,
phases, process settings, key hints). It imports nothing of the harness above it."""
