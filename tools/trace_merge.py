#!/usr/bin/env python3
"""Merges the per-rank traces of a crnet job (CRNET_TRACE) into one file that
a trace viewer shows as one timeline, a process per rank:

    tools/trace_merge.py job.json trace.*.json

then open job.json in https://ui.perfetto.dev or chrome://tracing. A file
cut short (a rank that died before crnet_comm_destroy) is read up to its
last whole event."""
import json
import sys


def events(path):
    text = open(path).read().rstrip()
    if not text:
        print(f"trace_merge: {path} is empty (its rank wrote nothing)",
              file=sys.stderr)
        return []
    if not text.endswith("]"):
        # Cut short: drop a torn last event, close the array.
        text = text[: text.rfind("}") + 1] + "]"
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        sys.exit(f"trace_merge: {path}: not a crnet trace: {e}")


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: trace_merge.py OUT.json TRACE.json...")
    merged = []
    for path in sys.argv[2:]:
        merged.extend(events(path))
    with open(sys.argv[1], "w") as f:
        json.dump(merged, f)
    print(f"trace_merge: {len(merged)} events from {len(sys.argv) - 2} files "
          f"in {sys.argv[1]}")


main()
