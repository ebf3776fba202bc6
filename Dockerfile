# drover in a container: the server (the default command) and the agent's image in the
# manifests `drover runtimes link` prints (they run it with `args: [agent, …]`).
#   docker build --build-arg VERSION="$(git describe --tags --always)" -t registry.example.com/drover:… .
#   docker run -d -p 7420:7420 -v drover-data:/data registry.example.com/drover:…
#   drover runtimes link prod-eu --image registry.example.com/drover:…
# docs/packaging.md says more (TLS, --public-name, health checks).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# make build: stripped, -trimpath, the Makefile's BUILD_TAGS, the version stamped in;
# CGO_ENABLED=0 for a static binary (the embedded store, modernc.org/sqlite, is pure Go).
RUN CGO_ENABLED=0 make build VERSION="${VERSION}" \
	&& install -D -m 0755 bin/drover /out/drover \
	&& install -d -m 0700 /out/data

# Static binary, no shell; runs as the non-root user 65532 (the manifests ask for one).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/drover /usr/local/bin/drover
# The data directory (the embedded database, the local token, the keyring that seals
# secrets at rest): a volume, owned by the user drover runs as.
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME ["/data"]
# 7420: the API and web UI; 7421: agents, when the server is started with --agent-listen.
EXPOSE 7420 7421
ENTRYPOINT ["/usr/local/bin/drover"]
# On 0.0.0.0 the server speaks TLS (a self-signed certificate kept in /data unless
# --tls-cert/--tls-key; it prints the fingerprint) and answers any IP address; add
# --public-name NAME for the host name clients use.
# No HEALTHCHECK: the image has no HTTP client, and drover has no probe command yet; in
# Kubernetes, probe GET /livez and GET /readyz (answered without a token) with httpGet,
# scheme HTTPS.
CMD ["server", "--data", "/data", "--listen", "0.0.0.0:7420"]
