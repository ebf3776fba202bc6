# drover in a container: the agent's image in the manifests `drover runtimes link` prints
# (and the server's, if you run it in a cluster).
#   docker build -t registry.example.com/drover:$(git describe --tags --always) .
#   drover runtimes link prod-eu --image registry.example.com/drover:…
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/drover-dev/drover/internal/version.Version=${VERSION}" -o /out/drover ./cmd/drover

# Static binary, no shell; runs as a non-root user (the manifests ask for one).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/drover /usr/local/bin/drover
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/drover"]
