#!/bin/sh
# mmdebstrap --extract-hook (tools/image/build.sh): the packages just extracted, as
# "NAME VERSION SHA256" lines (compared with cronjob/image.lock), and each one's
# control fields (written into the image as /var/lib/dpkg/status.d/NAME, the way
# minimal images keep package metadata for scanners without a dpkg database), and
# the paths each one ships (so the build can take a package back out whole).
# $1 is the root file system; the .debs still sit in its apt cache at this point.
set -eu
root=$1
out="$root/.stowplan-debs"
mkdir -p "$out/status.d" "$out/files"
for deb in "$root"/var/cache/apt/archives/*.deb; do
    name=$(dpkg-deb -f "$deb" Package)
    version=$(dpkg-deb -f "$deb" Version)
    sum=$(sha256sum "$deb" | cut -d' ' -f1)
    printf '%s %s %s\n' "$name" "$version" "$sum" >> "$out/list"
    dpkg-deb -f "$deb" > "$out/status.d/$name"
    dpkg-deb --fsys-tarfile "$deb" | tar -t > "$out/files/$name"
done
LC_ALL=C sort -o "$out/list" "$out/list"
