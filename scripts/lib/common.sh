# Shared by scripts/demo and scripts/test: install what is missing, then build.
# Sourced, not run.

ONCE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ONCE_BUILD=${ONCE_BUILD_DIR:-$ONCE_ROOT/build}

# Debian 12 packages the build and the tests need. libqt6opengl6-dev is listed because
# QtCharts' CMake package needs Qt6OpenGL, which qt6-base-dev only recommends, and
# recommends are not installed here. postgresql (the server) and libqt6sql6-psql (Qt's
# driver) are for the store tests' PostgreSQL variants, which run against a private
# server from scripts/postgres-cluster; the package's post-install may create a system
# cluster, which nothing starts without an init system and the tests never use; openssl
# makes that server's TLS certificates. clang and its runtime libraries (libFuzzer, the
# sanitizers) build the fuzz targets of tests/fuzz (scripts/fuzz). qtkeychain-qt6-dev keeps
# the console's remembered passwords in the system keychain; dbus, gnome-keyring and
# libsecret-tools give tst_uikeychain a private Secret Service to remember them in.
# qt6-httpserver-dev serves the metrics endpoints of a worker (qt6-websockets-dev because
# Debian's Qt6HttpServer CMake package needs Qt6WebSockets but the package does not depend
# on it); prometheus brings promtool, which judges
# them, and the server that tst_prometheus scrapes them with (its post-install may enable
# a system service on port 9090, which nothing starts without an init system, and the
# tests run their own on a free port with a temporary folder). systemd brings
# systemd-analyze for the packaging_systemd test of the .deb's units. libssl-dev brings
# libcrypto's headers, for the RS256 signature that trades a Google service-account key
# for an access token (core/queues/pubsub).
ONCE_PACKAGES=(
    cmake ninja-build g++ pkg-config dpkg-dev
    qt6-base-dev qt6-base-dev-tools libqt6sql6-sqlite libsqlite3-dev libgl-dev
    libqt6opengl6-dev qt6-charts-dev qt6-svg-dev libqt6svg6 qt6-httpserver-dev qt6-websockets-dev
    xvfb xauth
    postgresql libqt6sql6-psql openssl
    rabbitmq-server redis-server librabbitmq-dev libhiredis-dev
    clang libclang-rt-14-dev
    qtkeychain-qt6-dev dbus gnome-keyring libsecret-tools
    prometheus systemd
    libssl-dev
    # libmicrohttpd (0.9.75, with GnuTLS) serves `once serve`'s HTTP (core/http/httpserver.*):
    # it bounds connections, heads, bodies and time, which Qt HTTP Server 6.4 does not.
    libmicrohttpd-dev
    # libcurl's SMTP client sends the smtp profile's mails (core/partners/smtpsender.cpp);
    # aiosmtpd is the SMTP server tst_smtp sends them to (tests/scripts/smtp-server)
    libcurl4-openssl-dev python3-aiosmtpd
    # tst_storenetwork drops a store's packets silently inside network namespaces of its own
    nftables
    # amtool checks the Alertmanager example the .deb ships (packaging/prometheus,
    # packaging_alertmanager_example); one Go binary, no other dependencies (its post-install
    # may enable a system service, which nothing starts without an init system)
    prometheus-alertmanager
    # librdkafka reads and writes Kafka topics (core/queues/kafka); its mock cluster is the
    # tests' Kafka (scripts/kafka-server), and kcat publishes to it as a team's tools would
    librdkafka-dev kcat
    # lld links the test suites (tests/CMakeLists.txt) in a quarter of GNU ld's time; without
    # it they link with the default linker
    lld
)

ensure_packages() {
    local missing=()
    local package
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ]; then
        echo "once: these Debian packages are missing: ${missing[*]}" >&2
        echo "once: run this script as root, or install them with: sudo apt-get install ${missing[*]}" >&2
        exit 1
    fi
    echo "once: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

# ensure_npm_ci DIR WHAT: Node.js, then the npm packages of DIR, exactly as its committed
# package-lock.json pins them. Node and npm are not in ONCE_PACKAGES because of how Debian
# and NodeSource split them: Debian's nodejs comes without npm, which is its own package,
# while NodeSource's nodejs bundles npm and conflicts with Debian's npm package, so asking
# for npm on such a machine would fail. So nodejs as usual, and the npm package only where
# no npm command came with it. Then `npm ci` installs what package-lock.json pins, again
# whenever the lockfile is newer than node_modules. The time of node_modules is that of a
# stamp written after a whole install (npm ci deletes node_modules first), so an
# interrupted one is redone.
ensure_npm_ci() {
    local dir=$1 what=$2
    ensure_packages nodejs
    command -v npm >/dev/null 2>&1 || ensure_packages npm
    local stamp=$dir/node_modules/.once-installed
    if [ ! -e "$stamp" ] || [ "$dir/package-lock.json" -nt "$stamp" ]; then
        echo "once: installing $what npm packages" >&2
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
        touch "$stamp"
    fi
}

# ensure_test_producers: the npm packages of tests/producers, the amqplib and ioredis
# clients that the broker tests publish reminders with.
ensure_test_producers() {
    ensure_npm_ci "$ONCE_ROOT/tests/producers" "the test producers'"
}

# ensure_sqs_emulators: the npm packages of tests/sqs-emulators, the Amazon SQS emulators
# (fauxqs, local-aws-sqs) that scripts/sqs-server runs for the SQS queue tests. Kept apart
# from tests/producers because they bring a web framework and the AWS SDK, which the
# producers do not need.
ensure_sqs_emulators() {
    ensure_npm_ci "$ONCE_ROOT/tests/sqs-emulators" "the SQS emulators'"
}

# build_once [TARGET...]: configures once, then builds the targets (default: all).
build_once() {
    cmake -S "$ONCE_ROOT" -B "$ONCE_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    local targets=()
    [ $# -gt 0 ] && targets=(--target "$@")
    cmake --build "$ONCE_BUILD" --parallel "$(nproc)" "${targets[@]}"
}
