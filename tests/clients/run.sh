#!/usr/bin/env bash
# The runner of the client scenario programs (tests/clients/go, tests/clients/java).
#
#   run.sh build              build both (go: the Go module proxy; java: Maven Central)
#   run.sh build-go | build-java
#   run.sh go ARGS...         run the Go program
#   run.sh java ARGS...       run the Java program
#
# ARGS: --service-url URL --admin-url URL --prefix P [--auth-service-url URL] [--only a,b]
# (the Go program takes the same flags with one dash or two). Each prints one JSON line per
# scenario {"scenario", "ok", "detail"} and exits 1 if any failed. Build output stays outside
# the repository, in PULSARCTL_CLIENTS_CACHE (default ~/.cache/pulsarctl-clients).
set -euo pipefail

HERE=$(cd -P "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${PULSARCTL_CLIENTS_CACHE:-$HOME/.cache/pulsarctl-clients}
GO_BIN=$CACHE/go/scenarios
JAVA_DIR=$CACHE/java

die() { echo "run.sh: $*" >&2; exit 1; }

build_go() {
    command -v go >/dev/null || die "go not found"
    mkdir -p "$CACHE/go"
    (cd "$HERE/go" && go build -o "$GO_BIN" .)
}

build_java() {
    command -v mvn >/dev/null || die "mvn not found"
    mvn -B -q -Dstyle.color=never -f "$HERE/java/pom.xml" "-Dclients.build.dir=$JAVA_DIR" package
}

cmd=${1:-}
[[ -n $cmd ]] || die "usage: run.sh build|build-go|build-java|go|java ..."
shift
case $cmd in
    build) build_go; build_java ;;
    build-go) build_go ;;
    build-java) build_java ;;
    go)
        [[ -x $GO_BIN ]] || die "no $GO_BIN: run 'tests/clients/run.sh build-go' first"
        exec "$GO_BIN" "$@"
        ;;
    java)
        [[ -d $JAVA_DIR/classes ]] || die "no $JAVA_DIR/classes: run 'tests/clients/run.sh build-java' first"
        exec java -Djava.net.preferIPv4Stack=true -Xmx256m -cp "$JAVA_DIR/classes:$JAVA_DIR/lib/*" \
            pulsarctl.clients.Main "$@"
        ;;
    *) die "unknown command: $cmd" ;;
esac
