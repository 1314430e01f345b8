# Berth in a container: the static binary and nothing else. This machine's
# Docker engine has no registry, so the image starts FROM scratch and the
# binary is built on the host first:
#
#   CGO_ENABLED=0 go build -o berth-linux ./cmd/berth
#   docker build -t berth:local .
#
# docker-compose.yml starts a three-node cluster from this image.
FROM scratch
COPY berth-linux /berth
VOLUME /data
EXPOSE 9092 9093 8081
ENTRYPOINT ["/berth", "serve"]
CMD ["--log.dirs", "/data", "--listeners", "PLAINTEXT://0.0.0.0:9092", "--http.listener", "0.0.0.0:8081"]
