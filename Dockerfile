# The labbot control plane (`labbot serve`). Point it at your Ray cluster with RAY_ADDRESS / RAY_AUTH_TOKEN;
# without them it starts an embedded single-node Ray head inside the container.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    LABBOT_HOME=/var/lib/labbot LABBOT_HOST=0.0.0.0 LABBOT_PORT=3000

WORKDIR /app
# git (the codebase server, the eval generator), bubblewrap (the sealed eval sandboxes; the container needs user
# namespaces: docker run --security-opt seccomp=unconfined, or a runtime that allows them), ripgrep (fast search)
RUN apt-get update && apt-get install -y --no-install-recommends git bubblewrap ripgrep \
    && rm -rf /var/lib/apt/lists/*
# The control plane itself needs no GPU: pass PyTorch's CPU wheel index to keep the image small, e.g.
#   docker build --build-arg TORCH_PIP_ARGS="--index-url <PyTorch CPU wheel index>" -t labbot .
ARG TORCH_PIP_ARGS=""
RUN pip install --no-cache-dir ${TORCH_PIP_ARGS} torch==2.13.0
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
# the jobs extra is torch (above): the embedded Ray head runs the reference job tiny-lm in this container
RUN pip install --no-cache-dir -c constraints.txt ./client ".[jobs]"

RUN useradd --create-home --uid 1000 labbot && mkdir -p /var/lib/labbot && chown labbot /var/lib/labbot
USER labbot
VOLUME ["/var/lib/labbot"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request,os; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"LABBOT_PORT\"]}/healthz')"
ENTRYPOINT ["labbot"]
CMD ["serve"]
