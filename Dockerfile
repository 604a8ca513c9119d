# weft daemon in a container, its home in a volume.
#
#   docker build -t weft .
#   docker run -d --name weft -v weft-home:/home/weft/.weft -p 4001:4001/tcp -p 4001:4001/udp weft
#   docker exec weft weft status
#   docker logs -f weft                       # its log (stderr)
#
# The API socket lives in the volume (/home/weft/.weft/weft.sock): other
# containers that mount the volume as the same user (uid 10001) can use it.
# mDNS does not cross Docker's bridge network: give --bootstrap ADDR (as
# daemon flags after the image name, which replace CMD), or run with
# --network host on a LAN. The image has no shell, so `weft handle` (which
# runs its command with /bin/sh) belongs in an image of your own FROM this.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -buildid=" -o /out/weft ./cmd/weft
# The home, owned by the daemon's user: a new named volume copies it, owner
# and mode included, so the daemon can write there.
RUN mkdir -p /out/home/weft/.weft && chown -R 10001:10001 /out/home/weft && chmod 0700 /out/home/weft/.weft

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/weft /usr/local/bin/weft
COPY --from=build /out/home /home
USER 10001:10001
ENV WEFT_HOME=/home/weft/.weft
VOLUME /home/weft/.weft
EXPOSE 4001/tcp 4001/udp
ENTRYPOINT ["/usr/local/bin/weft"]
CMD ["daemon", "--listen", "/ip4/0.0.0.0/tcp/4001", "--listen", "/ip4/0.0.0.0/udp/4001/quic-v1"]
