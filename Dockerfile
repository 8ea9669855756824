# The labbot control plane (`labbot serve`). Point it at your Ray cluster with RAY_ADDRESS / RAY_AUTH_TOKEN;
# without them it starts an embedded single-node Ray head inside the container.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    LABBOT_HOME=/var/lib/labbot LABBOT_HOST=0.0.0.0 LABBOT_PORT=3000

WORKDIR /app
# The control plane needs no torch; the reference jobs (tiny-lm) on the embedded Ray head do. Pass PyTorch's CPU
# wheel index to keep the image small, e.g.
#   docker build --build-arg TORCH_PIP_ARGS="--index-url <PyTorch CPU wheel index>" -t labbot .
# or --build-arg TORCH=no for a control plane that only talks to an outside Ray cluster.
ARG TORCH_PIP_ARGS=""
ARG TORCH=yes
RUN if [ "$TORCH" = yes ]; then pip install --no-cache-dir ${TORCH_PIP_ARGS} torch==2.13.0; fi
COPY pyproject.toml constraints.txt README.md ./
COPY client ./client
# labbot/ holds the import package: symlinks to the folders below, which the wheel build turns into files
COPY labbot ./labbot
COPY bot ./bot
COPY agents ./agents
COPY mcp_servers ./mcp_servers
COPY training ./training
COPY storage ./storage
COPY common ./common
RUN pip install --no-cache-dir -c constraints.txt ./client . && rm -rf /app/build

RUN useradd --create-home --uid 1000 labbot && mkdir -p /var/lib/labbot && chown labbot /var/lib/labbot
USER labbot
VOLUME ["/var/lib/labbot"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request,os; urllib.request.urlopen(f'http://127.0.0.1:{os.environ[\"LABBOT_PORT\"]}/healthz')"
ENTRYPOINT ["labbot"]
CMD ["serve"]
