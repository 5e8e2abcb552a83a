#!/usr/bin/env bash
# Installs everything fscrypt-rs's build, tests and demo need on a fresh Debian
# machine. Idempotent: safe to run again. Needs root (or sudo) for apt-get.
set -euo pipefail

need_apt=()
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
command -v debugfs >/dev/null 2>&1 || need_apt+=(e2fsprogs)
command -v losetup >/dev/null 2>&1 || need_apt+=(mount)
command -v cmp >/dev/null 2>&1 || need_apt+=(diffutils)
command -v setfacl >/dev/null 2>&1 || need_apt+=(acl)
# mkfs.ext4 (e2fsprogs), losetup/mount and setpriv (util-linux, for the
# multi-user remove-key test) are used by the kernel tests.
command -v mkfs.ext4 >/dev/null 2>&1 || need_apt+=(e2fsprogs)
command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux)
# setfacl (acl): the `encrypt --convert` test sets ACLs on the tree it converts.
command -v setfacl >/dev/null 2>&1 || need_apt+=(acl)
# unison: the sync test (crates/fscrypt-fuse/tests/sync_merge.rs) merges two
# replicas of a vault with a real sync tool.
command -v unison >/dev/null 2>&1 || need_apt+=(unison)
# rsync: the ACL test (crates/fscrypt-fuse/tests/acl.rs) copies with rsync -aA.
command -v rsync >/dev/null 2>&1 || need_apt+=(rsync)
# google/fscrypt 0.3.x (the `fscrypt` tool), its PAM module and pamtester: the
# interop tests (crates/fscrypt-cli/tests/gfs_interop.rs) check fscrypt-rs's
# `setup/encrypt/unlock/lock/status` against the real tool's metadata.
command -v fscrypt >/dev/null 2>&1 || need_apt+=(fscrypt)
[ -e /usr/share/pam-configs/fscrypt ] || [ -e /lib/x86_64-linux-gnu/security/pam_fscrypt.so ] \
    || dpkg -s libpam-fscrypt >/dev/null 2>&1 || need_apt+=(libpam-fscrypt)
command -v pamtester >/dev/null 2>&1 || need_apt+=(pamtester)
# Sealed protectors (issue 25; crates/fscrypt-seal): a private software TPM
# (swtpm on a loopback port) and tpm2-tools for the PCR-change test, the TSS
# libraries tss-esapi links against, a private PKCS#11 token (softhsm2), and
# Debian's age for the age interop test.
command -v swtpm >/dev/null 2>&1 || need_apt+=(swtpm swtpm-tools)
command -v tpm2_pcrextend >/dev/null 2>&1 || need_apt+=(tpm2-tools)
pkg-config --exists tss2-esys 2>/dev/null || need_apt+=(libtss2-dev pkg-config)
command -v softhsm2-util >/dev/null 2>&1 || need_apt+=(softhsm2)
command -v age >/dev/null 2>&1 || need_apt+=(age)
# FIDO2 protectors load libfido2.so.1 at run time (its tests talk to a
# software authenticator through it).
ldconfig -p 2>/dev/null | grep -q 'libfido2\.so\.1 ' || need_apt+=(libfido2-1)
# aws-lc-sys (fscrypt-crypto's AES-XTS/CBC backend) compiles aws-lc with a C compiler.
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)

if [ ${#need_apt[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    # Wait for another apt/dpkg (unattended upgrades, a second setup) instead
    # of failing at once on its lock.
    apt_opts=(-o DPkg::Lock::Timeout=600 -qq)
    echo "setup: installing Debian packages: ${need_apt[*]} (waits up to 10 min for a busy dpkg lock)"
    if ! $SUDO apt-get "${apt_opts[@]}" update; then
        echo "setup: 'apt-get update' failed; check the network and /etc/apt/sources.list, then run this script again" >&2
        exit 1
    fi
    if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get "${apt_opts[@]}" install -y "${need_apt[@]}" >/dev/null; then
        echo "setup: installing ${need_apt[*]} failed (see apt's message above); fix it and run this script again" >&2
        exit 1
    fi
fi

# Loop devices for the kernel tests (a module on some kernels).
[ -e /dev/loop-control ] || modprobe loop 2>/dev/null || true
# FUSE's kernel module (built in on most kernels; load it when it is a module).
[ -e /dev/fuse ] || modprobe fuse 2>/dev/null || true
# Mounting without root (fusermount3 opens /dev/fuse with the user's own
# rights) needs /dev/fuse mode 0666, which Debian's udev rule sets. Some
# machines (container images, VMs made from them) leave it 0600, so only
# root can mount FUSE; put it back to 0666 (until the next boot, when udev
# applies its rule). The unprivileged mount tests need it.
if [ -c /dev/fuse ] && [ "$(stat -c %a /dev/fuse)" = 600 ]; then
    echo "setup: /dev/fuse is mode 0600 (only root can mount FUSE); chmod 0666 /dev/fuse as Debian's udev rule does"
    chmod 0666 /dev/fuse
fi
# pjdfstest 0.2.2 (the POSIX suite run against the FUSE mount by
# crates/fscrypt-fuse/tests/pjdfstest.rs), from crates.io.
if ! command -v pjdfstest >/dev/null 2>&1 && [ ! -x "${CARGO_HOME:-$HOME/.cargo}/bin/pjdfstest" ]; then
    echo "setup: cargo install pjdfstest --version 0.2.2"
    if ! cargo install --quiet pjdfstest --version 0.2.2; then
        echo "setup: installing pjdfstest from crates.io failed; the pjdfstest test will fail until it is installed" >&2
        exit 1
    fi
fi
if command -v fscrypt >/dev/null 2>&1; then
    echo "setup: $(fscrypt --version 2>&1 | head -n1)"
fi
echo "setup: done"
