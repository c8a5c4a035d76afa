# Shared by scripts/demo and scripts/test: install what is missing, then build.
# Sourced, not run.

ONCE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ONCE_BUILD=${ONCE_BUILD_DIR:-$ONCE_ROOT/build}

# Debian 12 packages the build and the tests need. libqt6opengl6-dev is listed because
# QtCharts' CMake package needs Qt6OpenGL, which qt6-base-dev only recommends, and
# recommends are not installed here. postgresql (the server) and libqt6sql6-psql (Qt's
# driver) are for the store tests' PostgreSQL variants, which run against a private
# server from scripts/postgres-cluster; the package's post-install may create a system
# cluster, which nothing starts without an init system and the tests never use.
ONCE_PACKAGES=(
    cmake ninja-build g++ pkg-config dpkg-dev
    qt6-base-dev qt6-base-dev-tools libqt6sql6-sqlite libsqlite3-dev libgl-dev
    libqt6opengl6-dev qt6-charts-dev qt6-svg-dev libqt6svg6
    xvfb xauth
    postgresql libqt6sql6-psql
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

# build_once [TARGET...]: configures once, then builds the targets (default: all).
build_once() {
    cmake -S "$ONCE_ROOT" -B "$ONCE_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    local targets=()
    [ $# -gt 0 ] && targets=(--target "$@")
    cmake --build "$ONCE_BUILD" --parallel "$(nproc)" "${targets[@]}"
}
