#!/bin/sh
# The image's build steps, one per Dockerfile RUN line. deploy/check_image.py (`make image-check`)
# runs the same lines outside a container, in a fresh virtualenv.
#   build.sh venv VENV REQUIREMENTS   a virtualenv with the pinned runtime packages
#   build.sh app VENV APP             static files collected under TRAINYARD_STATIC_ROOT, checks
set -eu
step=$1 venv=$2
case "$step" in
  venv)
    python -m venv "$venv"
    "$venv/bin/pip" install --no-cache-dir --disable-pip-version-check -q -r "$3"
    ;;
  app)
    cd "$3"
    # Production settings need a secret key and field keys to load; these only serve
    # collectstatic and are thrown away (no database is touched at build time).
    export TRAINYARD_DEBUG=false TRAINYARD_SECRET_KEY=collectstatic-only
    TRAINYARD_FIELD_KEYS=$("$venv/bin/python" -c \
      'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())')
    export TRAINYARD_FIELD_KEYS
    TRAINYARD_VAR_DIR=$(mktemp -d)
    export TRAINYARD_VAR_DIR
    "$venv/bin/python" manage.py check
    "$venv/bin/python" manage.py collectstatic --noinput -v 0
    rm -rf "$TRAINYARD_VAR_DIR"
    ;;
  *)
    echo "unknown step: $step" >&2
    exit 2
    ;;
esac
