# shellcheck shell=bash
# Installing the Debian packages the project's scripts need, when missing.
# Sourced by scripts/zk and scripts/sim-instructions; writes only to stderr,
# so that a caller's stdout stays its own.

# The packages of "$@" that are not installed, one per line.
apt_missing() {
    local package
    for package in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
            echo "$package"
        fi
    done
}

# apt_install_missing WHO PACKAGE...: installs those of the packages that are
# missing (as root; otherwise fails naming the command to run). WHO names the
# calling script in its messages. apt-get's package lists are refreshed only
# when an install from them fails.
apt_install_missing() {
    local who=$1
    shift
    local missing
    missing=$(apt_missing "$@" | tr '\n' ' ')
    if [[ -z ${missing// /} ]]; then
        echo "$who: $* already installed" >&2
        return 0
    fi
    if [[ $(id -u) -ne 0 ]]; then
        # The update first: a fresh machine has never fetched the lists.
        echo "$who: missing packages: $missing-- run as root: apt-get update && apt-get install -y $missing" >&2
        return 1
    fi
    echo "$who: installing $missing" >&2
    # A fresh machine may be running its own apt job at boot: wait for its
    # lock for a while instead of failing at once.
    local wait_for_lock=(-o DPkg::Lock::Timeout=300)
    # shellcheck disable=SC2086 # one word per package
    if ! DEBIAN_FRONTEND=noninteractive apt-get "${wait_for_lock[@]}" install -y --no-install-recommends $missing >&2; then
        apt-get "${wait_for_lock[@]}" update >&2
        # shellcheck disable=SC2086
        DEBIAN_FRONTEND=noninteractive apt-get "${wait_for_lock[@]}" install -y --no-install-recommends $missing >&2
    fi
    missing=$(apt_missing "$@" | tr '\n' ' ')
    if [[ -n ${missing// /} ]]; then
        echo "$who: still missing after apt-get: $missing" >&2
        return 1
    fi
}
