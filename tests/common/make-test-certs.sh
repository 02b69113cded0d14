#!/usr/bin/env bash
# Makes a throw-away CA, a server certificate (localhost, 127.0.0.1, ::1) and
# a client certificate with the openssl CLI, for TLS and mutual-TLS tests.
#   tests/common/make-test-certs.sh DIR
# Writes DIR/{ca,server,client,other-ca}.{crt,key}; other-ca signs nothing
# the server trusts (for "wrong CA" tests). Keys are world-readable: TEST ONLY.
set -euo pipefail
dir="${1:?usage: make-test-certs.sh DIR}"
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "make-test-certs: $* failed" >&2; exit 1; }; }
for ca in ca other-ca; do
  quiet openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=dpopt test $ca" \
    -keyout "$ca.key" -out "$ca.crt"
done
cat > san.cnf <<'CNF'
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1
CNF
quiet openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr
quiet openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
  -extfile san.cnf -out server.crt
quiet openssl req -newkey rsa:2048 -nodes -subj "/CN=dpopt test client" -keyout client.key -out client.csr
quiet openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
  -out client.crt
chmod 644 ./*.key
rm -f ./*.csr ./*.srl san.cnf
