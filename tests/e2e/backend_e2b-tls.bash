# Hooks for the e2b backend over TLS: the fake E2B serves both planes with
# a certificate of its own CA, reached through E2B_DOMAIN only (the
# self-hosted setup), the CA given with -o ca_file=. Everything else is
# backend_e2b.bash's.

E2B_FAKE_MODE=tls
# shellcheck source=backend_e2b.bash
source "$(dirname "${BASH_SOURCE[0]}")/backend_e2b.bash"
