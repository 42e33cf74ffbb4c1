# One image for the console's web, worker and beat processes (docs/operations.md, "Deploying").
# Its RUN lines are deploy/build.sh steps, which `make image-check` runs outside a container.

# --- build: a virtualenv with the pinned packages, and the static files collected -------------
FROM python:3.12-slim-bookworm AS build
COPY requirements.txt deploy/build.sh /build/
RUN sh /build/build.sh venv /opt/venv /build/requirements.txt
COPY . /app
ENV TRAINYARD_STATIC_ROOT=/app/staticfiles
RUN sh /build/build.sh app /opt/venv /app

# --- runtime: the same Python, the virtualenv and the app, run by an unprivileged user --------
FROM python:3.12-slim-bookworm AS runtime
RUN groupadd --system --gid 10001 trainyard \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin trainyard \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/trainyard
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TRAINYARD_DEBUG=false \
    TRAINYARD_VAR_DIR=/var/lib/trainyard \
    TRAINYARD_STATIC_ROOT=/app/staticfiles \
    PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus
WORKDIR /app
USER 10001:10001
EXPOSE 8000
# The web process; the worker and the beat override the command (deploy/console/*.yaml).
CMD ["gunicorn", "-c", "deploy/gunicorn.conf.py", "console.wsgi"]
