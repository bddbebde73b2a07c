# Hooks for the modal backend over TLS: the fake Modal serves the control
# plane and the task router with a certificate of its own CA, the CA given
# with -o ca_file= (the production TLS path: ALPN h2, verified). Everything
# else is backend_modal.bash's.

MODAL_FAKE_MODE=tls
# shellcheck source=backend_modal.bash
source "$(dirname "${BASH_SOURCE[0]}")/backend_modal.bash"
