#!/usr/bin/env bash
# Builds the debian:bookworm-slim base image locally, without any image
# registry: debootstrap a minimal Debian 12 root file system, then
# `docker import` it. See DEVELOPERS.md ("Offline base image").
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: deploy/make-base-image.sh [options]

Builds the Docker base image that deploy/Dockerfile starts FROM
(default tag: debian:bookworm-slim) without pulling from any image registry:

  debootstrap --variant=minbase bookworm ROOTFS MIRROR
  tar -C ROOTFS -c . | docker import - debian:bookworm-slim

This is what curators on air-gapped sites run: point --mirror at a local
Debian mirror (http://, https:// or file:// URL) and the image is built from
packages you already trust. The image's /etc/apt/sources.list points at the
same mirror, so `apt-get install` in the Dockerfile uses it too.

The script is idempotent: if the tag already exists it does nothing, unless
--force is given.

Options:
  --tag NAME            image tag to create (default: debian:bookworm-slim)
  --mirror URL          Debian mirror (default: http://deb.debian.org/debian)
  --security-mirror URL security mirror written to the image's sources.list
                        (default: http://deb.debian.org/debian-security when
                        --mirror is the default, otherwise none; pass "none"
                        to omit it)
  --keyring FILE        keyring debootstrap verifies the mirror with
                        (default: debootstrap's, i.e. Debian's archive keyring)
  --force               rebuild even if the tag already exists
  --keep-rootfs DIR     build the root file system in DIR and keep it
                        (default: a temporary directory, removed afterwards)
  -h, --help            show this help

Requires root (debootstrap), debootstrap and a running Docker engine.
Takes a few minutes; the resulting image is about 100 MB.
EOF
}

tag="debian:bookworm-slim"
default_mirror="http://deb.debian.org/debian"
mirror="$default_mirror"
security_mirror=""
security_set=0
keyring=""
force=0
keep_rootfs=""

while [[ $# -gt 0 ]]; do
  case "$1" in
    --tag) tag="${2:?--tag needs a value}"; shift 2 ;;
    --tag=*) tag="${1#*=}"; shift ;;
    --mirror) mirror="${2:?--mirror needs a URL}"; shift 2 ;;
    --mirror=*) mirror="${1#*=}"; shift ;;
    --security-mirror) security_mirror="${2:?--security-mirror needs a URL}"; security_set=1; shift 2 ;;
    --security-mirror=*) security_mirror="${1#*=}"; security_set=1; shift ;;
    --keyring) keyring="${2:?--keyring needs a file}"; shift 2 ;;
    --keyring=*) keyring="${1#*=}"; shift ;;
    --force) force=1; shift ;;
    --keep-rootfs) keep_rootfs="${2:?--keep-rootfs needs a directory}"; shift 2 ;;
    --keep-rootfs=*) keep_rootfs="${1#*=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "make-base-image: unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ $security_set -eq 0 && "$mirror" == "$default_mirror" ]]; then
  security_mirror="http://deb.debian.org/debian-security"
fi
[[ "$security_mirror" == "none" ]] && security_mirror=""

die() { echo "make-base-image: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker client not found"
docker info >/dev/null 2>&1 || die "no Docker engine answers (docker info failed)"

if [[ $force -eq 0 ]] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "make-base-image: $tag already exists (use --force to rebuild)"
  exit 0
fi

command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)"
[[ $(id -u) -eq 0 ]] || die "debootstrap needs root"

if [[ -n "$keep_rootfs" ]]; then
  rootfs="$keep_rootfs"
  mkdir -p "$rootfs"
  [[ -z "$(ls -A "$rootfs")" ]] || die "--keep-rootfs directory $rootfs is not empty"
  cleanup() { :; }
else
  rootfs="$(mktemp -d /tmp/dpopt-rootfs.XXXXXX)"
  cleanup() { rm -rf --one-file-system "$rootfs"; }
fi
trap cleanup EXIT

echo "make-base-image: debootstrap bookworm from $mirror into $rootfs"
args=(--variant=minbase)
[[ -n "$keyring" ]] && args+=(--keyring="$keyring")
debootstrap "${args[@]}" bookworm "$rootfs" "$mirror"

# apt sources of the image: the mirror it was built from (+ security).
{
  echo "deb $mirror bookworm main"
  if [[ "$mirror" == "$default_mirror" ]]; then
    echo "deb $mirror bookworm-updates main"
  fi
  if [[ -n "$security_mirror" ]]; then
    echo "deb $security_mirror bookworm-security main"
  fi
} > "$rootfs/etc/apt/sources.list"

# Keep the image small, the way Debian's own slim images do: no docs or man
# pages from later installs, no apt caches or package lists in the layer.
mkdir -p "$rootfs/etc/dpkg/dpkg.cfg.d" "$rootfs/etc/apt/apt.conf.d"
cat > "$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
cat > "$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Install-Recommends "false";
EOF
cat > "$rootfs/etc/apt/apt.conf.d/docker-no-languages" <<'EOF'
Acquire::Languages "none";
EOF
rm -rf "$rootfs"/usr/share/doc/*/changelog* "$rootfs"/usr/share/man/* \
       "$rootfs"/usr/share/info/* "$rootfs"/var/lib/apt/lists/* \
       "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
       "$rootfs"/var/log/*.log "$rootfs"/tmp/* 2>/dev/null || true
# apt downloads as user _apt into lists/partial (mode 0700, owned by _apt).
apt_uid="$(awk -F: '$1 == "_apt" { print $3 }' "$rootfs/etc/passwd")"
install -d -m 0700 -o "${apt_uid:-0}" -g 0 "$rootfs/var/lib/apt/lists/partial"
# The container's own /etc/hostname, /etc/resolv.conf and /etc/hosts are
# bind-mounted by Docker; do not bake the build host's into the image.
: > "$rootfs/etc/hostname"
rm -f "$rootfs/etc/resolv.conf"

# mktemp -d makes the directory 0700, and tar records "." with that mode:
# the image's / would be unreadable for any non-root user.
chmod 0755 "$rootfs"

echo "make-base-image: importing as $tag"
tar --numeric-owner -C "$rootfs" -c . |
  docker import \
    --change 'CMD ["bash"]' \
    --change 'ENV LANG=C.UTF-8' \
    --message "debootstrap --variant=minbase bookworm $mirror (dpopt deploy/make-base-image.sh)" \
    - "$tag"
# Sanity check: an unprivileged user can run programs in the image.
docker run --rm --network none --user 65534:65534 "$tag" /bin/true ||
  die "the imported image does not run programs as a non-root user"
docker image inspect --format 'make-base-image: {{.RepoTags}} {{.Id}} {{.Size}} bytes' "$tag"
