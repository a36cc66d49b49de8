package main

// The public root certificates, compiled in for machines that have none:
// the container image is built FROM scratch, with no CA file, and a
// static binary is often copied onto such images. Without them every
// HTTPS forward target and OTLP collector fails with "certificate signed
// by unknown authority". They are used only when the system offers no
// roots of its own: a bundle mounted and named by SSL_CERT_FILE (or
// SSL_CERT_DIR) wins, so a private CA still works.
import _ "golang.org/x/crypto/x509roots/fallback"
