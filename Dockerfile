# labbot's images, from one build context (docs/deploy.md):
#
#   docker build -t labbot .                  the control plane (`labbot serve`): no torch, no GPU, non-root (10001)
#   docker build --target ray -t labbot-ray .  the Ray head and workers of your cluster (KubeRay): labbot with its
#                                              `jobs` extra (torch) on Ray's image, for the reference jobs and evals
#
# The control plane needs a Ray cluster: point it at one with RAY_ADDRESS / RAY_AUTH_TOKEN (deploy/). Without them it
# starts an embedded single-node Ray head inside its container, which can run labbot's own services but not the
# reference jobs (they need torch): for a one-container try-out, run `labbot serve` in the `ray` image instead.

# ---- builder: a virtual environment with labbot and labbot-client installed (build tools stay here) ----------------
FROM python:3.11-slim AS builder
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
# compilers for any dependency without a wheel for this platform; not copied into the runtime
RUN apt-get update && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
# labbot/ is the import package (its subpackages are relative symlinks to the folders beside it; the wheel holds
# real files); client/ is labbot-client, which labbot pins and which is installed from here, not from an index
COPY client ./client
COPY labbot ./labbot
COPY bot ./bot
COPY agents ./agents
COPY common ./common
COPY mcp_servers ./mcp_servers
COPY evals ./evals
COPY training ./training
COPY storage ./storage
# the wheels, for the `ray` image; then the control plane's install: `.` without the `jobs` extra, so no torch
RUN pip wheel --no-deps --wheel-dir /wheels ./client . \
    && pip install -c constraints.txt ./client . \
    && python -c "import importlib.util, sys; sys.exit('torch in the control plane' if importlib.util.find_spec('torch') else 0)"

# ---- ray: the image of the RayCluster's head and workers (KubeRay); Ray's own image, its user `ray` --------------
FROM rayproject/ray:2.60.0-py311-gpu AS ray
USER root
# git (the eval generator), bubblewrap (the sealed eval sandboxes: the pod needs user namespaces), ripgrep
RUN apt-get update && apt-get install -y --no-install-recommends git bubblewrap ripgrep \
    && rm -rf /var/lib/apt/lists/*
USER ray
COPY --from=builder /src/constraints.txt /tmp/constraints.txt
COPY --from=builder /wheels /tmp/wheels
# the jobs extra is torch (the CUDA build PyPI serves on Linux); the client's s3 extra (fsspec, s3fs) lets jobs
# checkpoint to LABBOT_ARTIFACTS_URL=s3://… (the wheel installed once, with its extra: pip's `wheel[extra]` form)
RUN pip install --no-cache-dir -c /tmp/constraints.txt "$(ls /tmp/wheels/labbot_client-*.whl)[s3]" \
    "$(ls /tmp/wheels/labbot-*.whl)[jobs]"
# caches under /tmp: the Ray pods' root filesystem is read-only (deploy/raycluster.yaml), /tmp an emptyDir
ENV XDG_CACHE_HOME=/tmp/cache MPLCONFIGDIR=/tmp/matplotlib TRITON_CACHE_DIR=/tmp/triton

# ---- control plane: the default target, slim and non-root ------------------------------------------------------------
FROM python:3.11-slim AS control-plane
# git (the codebase MCP server reads git history), ripgrep (its fast search). No bubblewrap: evals run as Ray jobs
# on the workers (the `ray` image), never in the control plane.
RUN apt-get update && apt-get install -y --no-install-recommends git ripgrep \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --gid 10001 labbot && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/labbot labbot \
    && mkdir -p /var/lib/labbot && chown 10001:10001 /var/lib/labbot
COPY --from=builder /opt/venv /opt/venv
# caches under /tmp: with a read-only root filesystem (deploy/) /tmp and LABBOT_HOME are the writable places
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    MPLCONFIGDIR=/tmp/matplotlib XDG_CACHE_HOME=/tmp/cache \
    LABBOT_HOME=/var/lib/labbot LABBOT_HOST=0.0.0.0 LABBOT_PORT=3000
# an empty working directory: the `codebase` MCP server serves LABBOT_CODEBASE_ROOT (default: here), set it to a checkout
WORKDIR /srv/labbot
USER 10001:10001
EXPOSE 3000
# Kubernetes probes /healthz and /readyz itself (deploy/labbot.yaml); this is for plain `docker run`
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request,os; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"LABBOT_PORT\"]}/healthz')"
ENTRYPOINT ["labbot"]
CMD ["serve"]
