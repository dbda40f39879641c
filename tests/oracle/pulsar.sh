#!/usr/bin/env bash
# A real Apache Pulsar 4.x standalone for the oracle lane, resolved from Maven Central and run
# from its jars: no distribution tarball, no Docker. See tests/oracle/README.md.
#
#   pulsar.sh fetch                    resolve the jars (mvn; cached in ~/.m2 and the cache dir)
#   pulsar.sh netns CMD [ARGS...]      run CMD in a new network namespace with only lo, up
#   pulsar.sh start DATA_DIR [k=v...]  start the standalone (inside such a namespace), wait until
#                                      it serves; k=v lines are appended to standalone.conf
#   pulsar.sh stop DATA_DIR            stop it (SIGTERM, then SIGKILL after PULSAR_STOP_TIMEOUT)
#   pulsar.sh admin ARGS...            the real pulsar-admin
#   pulsar.sh admin-batch OUT_DIR      the real pulsar-admin, one command a line on stdin, in one
#                                      JVM (admin_script/AdminBatch.java says how)
#   pulsar.sh client ARGS...           the real pulsar-client
#   pulsar.sh perf ARGS...             the real pulsar-perf
#   pulsar.sh tokens ARGS...           the real `pulsar tokens`
#   pulsar.sh listeners                list listening sockets (ss); fail if one is off loopback
#   pulsar.sh isolated                 succeed only inside a namespace whose one interface is lo
#   pulsar.sh preflight                say why `start` cannot run here (no JVM started), or
#                                      nothing and exit 0 when it can
#
# Environment: PULSAR_VERSION (broker, default 4.2.4), PULSAR_TOOLS_VERSION (default 4.0.8: the
# newest pulsar-client-tools / pulsar-testclient on Maven Central), PULSAR_ORACLE_CACHE (jar
# cache, default ~/.cache/pulsarctl-oracle), JAVA_HOME, PULSAR_MEM (broker JVM memory flags),
# PULSAR_TOOL_MEM (the tools' JVM memory flags, default -Xmx512m: pulsar-perf needs that much),
# PULSAR_START_TIMEOUT / PULSAR_STOP_TIMEOUT (seconds, default 300 / 60: generous, the machine
# is shared), PULSAR_ORACLE_TOKEN (a token the admin/client/perf tools and the readiness check
# send, for a standalone started with authentication on), PULSAR_BROKER_PORT / PULSAR_WEB_PORT /
# PULSAR_BOOKIE_PORT (default 6650 / 8080 / 3181: other ports let a second standalone, say one
# with token auth, run beside the first; give the same ones to stop, admin, client and perf).
set -euo pipefail

ORACLE_DIR=$(cd -P "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PULSAR_VERSION=${PULSAR_VERSION:-4.2.4}
PULSAR_TOOLS_VERSION=${PULSAR_TOOLS_VERSION:-4.0.8}
CACHE=${PULSAR_ORACLE_CACHE:-$HOME/.cache/pulsarctl-oracle}
BROKER_LIB=$CACHE/broker-$PULSAR_VERSION
TOOLS_LIB=$CACHE/tools-$PULSAR_TOOLS_VERSION
START_TIMEOUT=${PULSAR_START_TIMEOUT:-300}
STOP_TIMEOUT=${PULSAR_STOP_TIMEOUT:-60}
BROKER_PORT=${PULSAR_BROKER_PORT:-6650}
WEB_PORT=${PULSAR_WEB_PORT:-8080}
BOOKIE_PORT=${PULSAR_BOOKIE_PORT:-3181}
if [[ -n ${JAVA_HOME:-} ]]; then JAVA=$JAVA_HOME/bin/java; else JAVA=java; fi

die() { echo "pulsar.sh: $*" >&2; exit 1; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Options every JVM here gets; the same module openings bin/pulsar passes on Java 17 (Netty and
# BookKeeper reach into JDK internals), IPv4 so nothing tries ::1 first.
COMMON_OPTS=(
    -Djava.net.preferIPv4Stack=true
    -Dio.netty.tryReflectionSetAccessible=true
    -Dorg.apache.pulsar.shade.io.netty.tryReflectionSetAccessible=true
    --add-opens java.base/java.io=ALL-UNNAMED
    --add-opens java.base/java.lang=ALL-UNNAMED
    --add-opens java.base/java.nio=ALL-UNNAMED
    --add-opens java.base/java.util.zip=ALL-UNNAMED
    --add-opens java.base/jdk.internal.misc=ALL-UNNAMED
    --add-opens java.base/sun.net=ALL-UNNAMED
    --add-opens java.management/sun.management=ALL-UNNAMED
    -Dlog4j.configurationFile="$ORACLE_DIR/log4j2.xml"
)

# Mark a jar directory complete only after mvn succeeded, so a half-copied cache is never used.
resolve() {  # profile version dir
    local profile=$1 version=$2 dir=$3 t0
    if [[ -f $dir/.complete ]]; then
        echo "pulsar.sh: $profile $version already in $dir" >&2
        return 0
    fi
    t0=$(now)
    rm -rf "$dir.part"
    mvn -B -q -Dstyle.color=never -f "$ORACLE_DIR/pom.xml" "-P$profile" "-Dpulsar.version=$version" \
        dependency:copy-dependencies -DincludeScope=runtime "-DoutputDirectory=$dir.part" \
        || die "mvn could not resolve the $profile jars of Pulsar $version (see its output above)"
    rm -rf "$dir"
    mv "$dir.part" "$dir"
    touch "$dir/.complete"
    echo "pulsar.sh: $profile $version resolved in $(elapsed "$t0") s:" \
        "$(find "$dir" -name '*.jar' | wc -l) jars, $(du -sh "$dir" | cut -f1)" >&2
}

need_jars() {  # dir what
    [[ -f $1/.complete ]] || die "no $2 jars in $1: run 'tests/oracle/pulsar.sh fetch' first"
}

# True only in a network namespace whose one interface is lo. /proc/self/net/dev follows the
# caller's namespace (unlike /sys/class/net, which shows the namespace sysfs was mounted in).
isolated() {
    local ifaces
    ifaces=$(awk -F: 'NR > 2 { gsub(/ /, "", $1); print $1 }' /proc/self/net/dev)
    [[ $ifaces == lo ]]
}

need_isolated() {
    isolated || die "refusing to start outside a loopback-only network namespace;" \
        "run it under 'tests/oracle/pulsar.sh netns ...'"
}

# Every listening TCP/UDP socket must be on 127.0.0.0/8 (or ::1).
listeners() {
    local out bad
    out=$(ss -H -ltunp)
    printf '%s\n' "$out"
    bad=$(printf '%s\n' "$out" | awk 'NF { split($5, a, ":"); addr = $5; sub(/:[^:]*$/, "", addr);
        if (addr !~ /^(127\.[0-9.]+|\[::1\]|\[::ffff:127\.[0-9.]+\])$/) print }')
    if [[ -n $bad ]]; then
        echo "pulsar.sh: listening off loopback:" >&2
        printf '%s\n' "$bad" >&2
        return 1
    fi
}

client_conf() {  # writes a client.conf for the tools to the given path
    {
        echo "webServiceUrl=http://127.0.0.1:$WEB_PORT/"
        echo "brokerServiceUrl=pulsar://127.0.0.1:$BROKER_PORT/"
        if [[ -n ${PULSAR_ORACLE_TOKEN:-} ]]; then
            echo "authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken"
            echo "authParams=token:$PULSAR_ORACLE_TOKEN"
        fi
    } > "$1"
}

run_tool() {  # log-level main-class args...: a tool JVM, its client.conf first (as bin/ does)
    local level=$1 main=$2 conf rc=0
    shift 2
    need_jars "$TOOLS_LIB" "pulsar-client-tools $PULSAR_TOOLS_VERSION"
    conf=$(mktemp "${TMPDIR:-/tmp}/pulsar-oracle-client.XXXXXX.conf")
    client_conf "$conf"
    "$JAVA" -cp "$TOOLS_LIB/*" "${COMMON_OPTS[@]}" ${PULSAR_TOOL_MEM:--Xmx512m} \
        -Dpulsar.log.appender=Stderr -Dpulsar.log.level="$level" \
        "$main" "$conf" "$@" || rc=$?
    rm -f "$conf"
    return "$rc"
}

# Answers once the standalone has finished its start-up: the web service lists public/default
# (created after the broker itself is up) and the binary port accepts a connection.
serving() {
    local auth=()
    [[ -n ${PULSAR_ORACLE_TOKEN:-} ]] && auth=(-H "Authorization: Bearer $PULSAR_ORACLE_TOKEN")
    curl -sf --max-time 5 "${auth[@]}" "http://127.0.0.1:$WEB_PORT/admin/v2/namespaces/public" \
        2>/dev/null | grep -q '"public/default"' \
        && (exec 3<>"/dev/tcp/127.0.0.1/$BROKER_PORT") 2>/dev/null
}

start() {
    local data=${1:-} pid t0 kv
    [[ -n $data ]] || die "usage: pulsar.sh start DATA_DIR [key=value...]"
    shift
    need_isolated
    need_jars "$BROKER_LIB" "pulsar-broker $PULSAR_VERSION"
    mkdir -p "$data/logs"
    data=$(cd -P "$data" && pwd)
    if [[ -f $data/pulsar.pid ]] && kill -0 "$(cat "$data/pulsar.pid")" 2>/dev/null; then
        die "a standalone already runs from $data (pid $(cat "$data/pulsar.pid"))"
    fi
    # A port already taken (say by `pulsarctl serve` on its defaults) would make the readiness
    # check below answer for the wrong server.
    local port
    for port in "$BROKER_PORT" "$WEB_PORT" "$BOOKIE_PORT"; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            die "127.0.0.1:$port is already in use (move this standalone with PULSAR_*_PORT)"
        fi
    done
    cp "$ORACLE_DIR/standalone.conf" "$data/standalone.conf"
    for kv in "$@"; do
        [[ $kv == *=* ]] || die "not key=value: $kv"
        printf '%s\n' "$kv" >> "$data/standalone.conf"
    done
    printf 'brokerServicePort=%s\nwebServicePort=%s\n' "$BROKER_PORT" "$WEB_PORT" \
        >> "$data/standalone.conf"
    t0=$(now)
    # The starter takes relative default paths (data/standalone/zookeeper decides ZooKeeper
    # mode when it exists), so it runs from the data directory, where none of them exist.
    # shellcheck disable=SC2086
    (cd "$data" && exec "$JAVA" -cp "$BROKER_LIB/*" "${COMMON_OPTS[@]}" \
        ${PULSAR_MEM:--Xms256m -Xmx512m -XX:MaxDirectMemorySize=512m} -XX:+UseG1GC \
        -XX:+ExitOnOutOfMemoryError -Dpulsar.allocator.exit_on_oom=true \
        -Dlog4j.shutdownHookEnabled=false \
        -Dpulsar.log.dir="$data/logs" -Dpulsar.log.file=pulsar-standalone.log \
        -Dpulsar.log.appender=File \
        -Dbookkeeper.metadata.bookie.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver \
        -Dbookkeeper.metadata.client.drivers=org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver \
        org.apache.pulsar.PulsarStandaloneStarter \
        --config "$data/standalone.conf" \
        --no-functions-worker --no-stream-storage \
        --advertised-address 127.0.0.1 \
        --metadata-dir "$data/metadata" \
        --bookkeeper-dir "$data/bookkeeper" --bookkeeper-port "$BOOKIE_PORT" \
        < /dev/null > "$data/logs/stdout.log" 2>&1) &
    pid=$!
    echo "$pid" > "$data/pulsar.pid"
    until serving; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 40 "$data/logs/pulsar-standalone.log" "$data/logs/stdout.log" >&2 || true
            die "the standalone exited during start-up (logs in $data/logs)"
        fi
        if [[ $(elapsed "$t0" | cut -d. -f1) -ge $START_TIMEOUT ]]; then
            tail -n 40 "$data/logs/pulsar-standalone.log" >&2 || true
            kill -KILL "$pid" 2>/dev/null || true
            die "the standalone did not serve within ${START_TIMEOUT}s (logs in $data/logs)"
        fi
        sleep 0.2
    done
    echo "pulsar.sh: Pulsar $PULSAR_VERSION standalone (pid $pid) serving on" \
        "127.0.0.1:$BROKER_PORT and :$WEB_PORT after $(elapsed "$t0") s" >&2
}

stop() {
    local data=${1:-} pid t0
    [[ -n $data ]] || die "usage: pulsar.sh stop DATA_DIR"
    [[ -f $data/pulsar.pid ]] || die "no pulsar.pid in $data"
    pid=$(cat "$data/pulsar.pid")
    t0=$(now)
    if kill -TERM "$pid" 2>/dev/null; then
        while kill -0 "$pid" 2>/dev/null; do
            if [[ $(elapsed "$t0" | cut -d. -f1) -ge $STOP_TIMEOUT ]]; then
                echo "pulsar.sh: no exit ${STOP_TIMEOUT}s after SIGTERM; SIGKILL" >&2
                kill -KILL "$pid" 2>/dev/null || true
                break
            fi
            sleep 0.2
        done
    fi
    rm -f "$data/pulsar.pid"
}

cmd=${1:-}
[[ -n $cmd ]] || die "usage: pulsar.sh fetch|netns|start|stop|admin|admin-batch|client|perf|tokens|listeners|isolated|preflight ..."
shift
case $cmd in
    fetch)
        command -v mvn >/dev/null || die "mvn not found"
        resolve broker "$PULSAR_VERSION" "$BROKER_LIB"
        resolve tools "$PULSAR_TOOLS_VERSION" "$TOOLS_LIB"
        ;;
    netns)
        [[ $# -gt 0 ]] || die "usage: pulsar.sh netns CMD [ARGS...]"
        exec unshare --net -- sh -c 'ip link set lo up && exec "$@"' sh "$@"
        ;;
    start) start "$@" ;;
    stop) stop "$@" ;;
    # admin and client print their results on stdout; pulsar-perf reports through its logger.
    admin) run_tool warn org.apache.pulsar.admin.cli.PulsarAdminTool "$@" ;;
    # A source file: java compiles it in memory (Java 11+), against the tools' jars.
    admin-batch) run_tool warn "$ORACLE_DIR/admin_script/AdminBatch.java" "$@" ;;
    client) run_tool warn org.apache.pulsar.client.cli.PulsarClientTool "$@" ;;
    perf) run_tool info org.apache.pulsar.testclient.PulsarPerfTestTool "$@" ;;
    tokens)
        need_jars "$BROKER_LIB" "pulsar-broker $PULSAR_VERSION"
        exec "$JAVA" -cp "$BROKER_LIB/*" "${COMMON_OPTS[@]}" -Dpulsar.log.appender=Stderr \
            -Dpulsar.log.level=warn org.apache.pulsar.utils.auth.tokens.TokensCliUtils "$@"
        ;;
    listeners) listeners ;;
    preflight)
        command -v "$JAVA" >/dev/null || die "no java (set JAVA_HOME or install a JDK 17+)"
        need_jars "$BROKER_LIB" "pulsar-broker $PULSAR_VERSION"
        need_jars "$TOOLS_LIB" "pulsar-client-tools $PULSAR_TOOLS_VERSION"
        need_isolated
        ;;
    isolated) isolated ;;
    *) die "unknown command: $cmd" ;;
esac
