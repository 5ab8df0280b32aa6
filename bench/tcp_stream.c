/*
 * One TCP stream over loopback, iperf3-style: a forked sender writes TOTAL bytes in
 * large writes (CHUNK bytes each, one buffer reused), the receiver reads them with
 * CHUNK-byte reads; the throughput is the bytes over the receiver's time from the
 * first byte to the last. bench/run.py holds topocomm's 2-node broadcast against it.
 *
 *   tcp_stream [TOTAL_BYTES [CHUNK_BYTES [REPEATS [CONGESTION]]]]
 *
 * (defaults 1 GiB, 1 MiB, 1, the host's congestion control). CONGESTION names the TCP
 * congestion control of both sockets (set before connect and listen, as topocomm's
 * links set theirs), so the stream runs under the algorithm topocomm's links use.
 *
 * Prints one line per transfer: the throughput in GB/s (10^9 bytes per second).
 */
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void fail(const char *what) {
    perror(what);
    exit(1);
}

/* Sets the congestion control `name` (NULL: keep the host's) on a fresh socket. */
static void set_congestion(int fd, const char *name) {
    if (name != NULL && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)) != 0) {
        fail("setsockopt TCP_CONGESTION");
    }
}

/* The child: connects to `port` and writes `total` bytes, `chunk` at a time. */
static void send_all(unsigned short port, long total, long chunk, const char *congestion) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0) {
        set_congestion(fd, congestion);
    }
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        fail("connect");
    }
    char *buffer = malloc((size_t)chunk);
    memset(buffer, 0x5a, (size_t)chunk);
    for (long left = total; left > 0;) {
        ssize_t n = write(fd, buffer, (size_t)(left < chunk ? left : chunk));
        if (n <= 0) {
            fail("write");
        }
        left -= n;
    }
    close(fd);
    free(buffer);
}

int main(int argc, char **argv) {
    long total = argc > 1 ? atol(argv[1]) : 1L << 30;
    long chunk = argc > 2 ? atol(argv[2]) : 1L << 20;
    int repeats = argc > 3 ? atoi(argv[3]) : 1;
    const char *congestion = argc > 4 ? argv[4] : NULL;
    char *buffer = malloc((size_t)chunk);
    for (int r = 0; r < repeats; r++) {
        int listener = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = 0};
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (listener >= 0) {
            set_congestion(listener, congestion);
        }
        if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 ||
            listen(listener, 1) != 0 || getsockname(listener, (struct sockaddr *)&address, &length) != 0) {
            fail("listen");
        }
        pid_t child = fork();
        if (child == 0) {
            send_all(ntohs(address.sin_port), total, chunk, congestion);
            _exit(0);
        }
        int fd = accept(listener, NULL, NULL);
        if (fd < 0) {
            fail("accept");
        }
        long got = 0;
        double started = 0.0;
        for (;;) {
            ssize_t n = read(fd, buffer, (size_t)chunk);
            if (n < 0) {
                fail("read");
            }
            if (n == 0) {
                break;
            }
            if (got == 0) {
                started = now();
            }
            got += n;
        }
        double elapsed = now() - started;
        close(fd);
        close(listener);
        waitpid(child, NULL, 0);
        printf("%.3f\n", (double)got / elapsed / 1e9);
        fflush(stdout);
    }
    free(buffer);
    return 0;
}
