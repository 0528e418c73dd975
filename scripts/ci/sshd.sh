#!/usr/bin/env bash
# OpenSSH for the SshSandbox tests. The tests' pytest fixture generates keys and a config and starts
# `sshd -D` on a random loopback port itself; CI only needs the binaries and the privilege-separation dir.
set -euo pipefail
if [ ! -x /usr/sbin/sshd ] || ! command -v ssh-keygen >/dev/null 2>&1; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssh-server openssh-client
fi
mkdir -p /run/sshd
