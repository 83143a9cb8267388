#include "pipeline/links/tcp_report_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace stragglar {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kPollMs = 50;  // how often a wait looks at the cancel flag

std::string Errno(absl::string_view what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

// This host's address as its name resolves (IPv4, not loopback), else 127.0.0.1.
std::string ThisHost() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(name, nullptr, &hints, &found) != 0) return "127.0.0.1";
  std::string address = "127.0.0.1";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    address = text;
    break;
  }
  freeaddrinfo(found);
  return address;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpListener>> TcpListener::Open(std::string advertised_host) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(Errno("socket"));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(fd, 1024) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string error = Errno("listening for link reports");
    close(fd);
    return absl::UnavailableError(error);
  }
  if (advertised_host.empty()) advertised_host = ThisHost();
  return std::unique_ptr<TcpListener>(
      new TcpListener(fd, absl::StrCat(advertised_host, ":", ntohs(address.sin_port))));
}

TcpListener::~TcpListener() { close(fd_); }

TcpReportTransport::TcpReportTransport(TcpTransportOptions options,
                                       std::unique_ptr<TcpListener> listener,
                                       std::string hub_address)
    : options_(options), listener_(std::move(listener)), hub_address_(std::move(hub_address)) {}

TcpReportTransport::~TcpReportTransport() {
  for (int fd : peers_) {
    if (fd >= 0) close(fd);
  }
}

absl::Status TcpReportTransport::Connect() {
  const Clock::time_point deadline = Clock::now() + options_.connect_timeout;
  if (options_.rank == 0) {
    peers_.assign(options_.size, -1);
    for (int joined = 1; joined < options_.size;) {
      if (cancelled_) return absl::CancelledError("link profiling stopped");
      if (Clock::now() > deadline) {
        return absl::UnavailableError(
            absl::StrCat(options_.size - joined, " ranks did not connect for link reports"));
      }
      pollfd waiting{.fd = listener_->fd(), .events = POLLIN};
      if (poll(&waiting, 1, kPollMs) <= 0) continue;
      const int fd = accept4(listener_->fd(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      int32_t rank = -1;
      if (!ReceiveAll(fd, &rank, sizeof(rank), -1).ok() || rank <= 0 || rank >= options_.size ||
          peers_[rank] >= 0) {
        close(fd);  // not one of ours, or a duplicate: ignored
        continue;
      }
      peers_[rank] = fd;
      ++joined;
    }
  } else {
    const std::vector<std::string> parts = absl::StrSplit(hub_address_, ':');
    int port = 0;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port) ||
        inet_pton(AF_INET, parts[0].c_str(), &address.sin_addr) != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad link report address \"", hub_address_, "\""));
    }
    address.sin_port = htons(static_cast<uint16_t>(port));
    while (true) {  // rank 0 may not listen yet: retry until the deadline
      if (cancelled_) return absl::CancelledError("link profiling stopped");
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return absl::UnavailableError(Errno("socket"));
      if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
        const int32_t rank = options_.rank;
        if (absl::Status sent = SendAll(fd, &rank, sizeof(rank)); !sent.ok()) {
          close(fd);
          return sent;
        }
        peers_ = {fd};
        break;
      }
      close(fd);
      if (Clock::now() > deadline) {
        return absl::UnavailableError(
            absl::StrCat("cannot reach rank 0 at ", hub_address_, " for link reports"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
    }
  }
  for (int fd : peers_) {
    const int on = 1;
    if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  }
  connected_ = true;
  return absl::OkStatus();
}

absl::Status TcpReportTransport::SendAll(int fd, const void* data, size_t bytes) {
  const char* next = static_cast<const char*>(data);
  while (bytes > 0) {
    if (cancelled_) return absl::CancelledError("link profiling stopped");
    pollfd ready{.fd = fd, .events = POLLOUT};
    if (poll(&ready, 1, kPollMs) <= 0) continue;
    const ssize_t sent = send(fd, next, bytes, MSG_NOSIGNAL);
    if (sent < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (sent <= 0) return absl::UnavailableError(Errno("sending link reports"));
    next += sent;
    bytes -= sent;
  }
  return absl::OkStatus();
}

absl::Status TcpReportTransport::ReceiveAll(int fd, void* data, size_t bytes, int peer) {
  char* next = static_cast<char*>(data);
  while (bytes > 0) {
    if (cancelled_) return absl::CancelledError("link profiling stopped");
    pollfd ready{.fd = fd, .events = POLLIN};
    if (poll(&ready, 1, kPollMs) <= 0) continue;
    const ssize_t got = recv(fd, next, bytes, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      return absl::UnavailableError(
          peer >= 0 ? absl::StrCat("rank ", peer, " closed the link report connection")
                    : std::string("a peer closed the link report connection"));
    }
    next += got;
    bytes -= got;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> TcpReportTransport::AllGather(absl::Span<const double> mine) {
  absl::StatusOr<std::vector<double>> all = GatherOnce(mine);
  if (!all.ok()) {
    // A failed gather ends this rank's exchanges: closing its connections tells the others now
    // (they see the connection close) rather than leaving them waiting for its block.
    for (int& fd : peers_) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
    connected_ = false;
    cancelled_ = true;
  }
  return all;
}

absl::StatusOr<std::vector<double>> TcpReportTransport::GatherOnce(absl::Span<const double> mine) {
  if (!connected_) {
    if (absl::Status connected = Connect(); !connected.ok()) return connected;
  }
  const size_t per_rank = mine.size();
  std::vector<double> all(per_rank * options_.size);
  if (options_.rank != 0) {
    if (absl::Status sent = SendAll(peers_[0], mine.data(), per_rank * sizeof(double));
        !sent.ok()) {
      return sent;
    }
    if (absl::Status got = ReceiveAll(peers_[0], all.data(), all.size() * sizeof(double), 0);
        !got.ok()) {
      return got;
    }
    return all;
  }
  std::copy(mine.begin(), mine.end(), all.begin());
  for (int rank = 1; rank < options_.size; ++rank) {
    if (absl::Status got =
            ReceiveAll(peers_[rank], &all[rank * per_rank], per_rank * sizeof(double), rank);
        !got.ok()) {
      return got;
    }
  }
  for (int rank = 1; rank < options_.size; ++rank) {
    if (absl::Status sent = SendAll(peers_[rank], all.data(), all.size() * sizeof(double));
        !sent.ok()) {
      return sent;
    }
  }
  return all;
}

}  // namespace stragglar
