#!/bin/sh
# `npm start`: the server from its compiled bundle, dist/service-auth.mjs. It prints nothing of its
# own: the first line is the server's (or the build's, when it had to compile), the ready line names
# the address, the editor (/admin, with where its admin token is) and the API reference (/docs).
set -u
cd "$(dirname "$0")/.." || exit 1

# Rebuild only when stale: a TypeScript file under src/, or a build setting, newer than the last
# build's stamp. `find` answers in milliseconds, so an up-to-date start never boots a second Node
# process; scripts/build.mjs --if-stale makes the same check again before compiling.
stale=$(find src tsconfig.json tsconfig.build.json package.json -type f -newer dist/.build-stamp \
  \( -name '*.ts' -o ! -path 'src/*' \) -print 2>/dev/null | head -n 1)
if [ ! -f dist/.build-stamp ] || [ -n "$stale" ]; then
  node scripts/build.mjs --if-stale || exit 1
fi

# V8's heap: small young-generation semi-spaces (8 MB) and a slow old-generation growth (20 %) keep
# an idle server's memory low; with traces exported (an OTLP endpoint set) the exporter allocates
# much more per request, so 64 MB semi-spaces and V8's own growth cost less time in the collector.
heap="--max-semi-space-size=8 --heap-growing-percent=20"
if [ -n "${OTEL_EXPORTER_OTLP_ENDPOINT:-}${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:-}" ]; then
  heap="--max-semi-space-size=64"
fi

# glibc's malloc: buffers above 128 KiB are mapped and returned to the system when freed, so a burst
# of large bodies does not leave the process's memory high; a value in the environment wins.
# Fixing that threshold also pins glibc's trim threshold at the same 128 KiB, so the heap's top was
# trimmed and grown again under load (an echo call cost 7-15 % more CPU); 2 MiB keeps at most that
# much free per heap.
MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-131072}
MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-2097152}
export MALLOC_MMAP_THRESHOLD_ MALLOC_TRIM_THRESHOLD_

# exec: the server replaces this shell, so npm's signals (SIGTERM, Ctrl-C) reach it directly and its
# exit code is npm's.
# shellcheck disable=SC2086 # $heap is two flags on purpose
exec node $heap dist/service-auth.mjs
