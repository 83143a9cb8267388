// The link reports' all-gather over TCP, between the processes of a communicator, on the host:
// no GPU work, no NCCL call from a second thread (NCCL forbids issuing operations to independent
// communicators of one device from several threads), nothing that a stuck peer can leave on the
// GPU. Hub and spokes: rank 0 listens, every other rank connects to it once; in each gather every
// rank sends its block to rank 0, which answers every rank with all blocks in rank order. Every
// wait polls with a short timeout, so Cancel() ends it promptly, and a peer that has gone is an
// error (Unavailable), never a hang.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/links/link_exchange.h"

namespace stragglar {

// Rank 0's listening socket, opened before its address is shared with the other ranks.
class TcpListener {
 public:
  // Listens on every interface, on a port the system picks. `advertised_host`: the address the
  // other ranks connect to (empty: this host's name as it resolves, or 127.0.0.1).
  static absl::StatusOr<std::unique_ptr<TcpListener>> Open(std::string advertised_host = "");
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  // "host:port", for the other ranks.
  const std::string& address() const { return address_; }
  int fd() const { return fd_; }

 private:
  TcpListener(int fd, std::string address) : fd_(fd), address_(std::move(address)) {}
  int fd_;
  std::string address_;
};

struct TcpTransportOptions {
  int rank = 0;
  int size = 0;
  // How long connecting (all ranks to rank 0) may take before it is an error.
  std::chrono::milliseconds connect_timeout{60000};
};

class TcpReportTransport final : public ReportTransport {
 public:
  // Rank 0 passes its listener; the others rank 0's address() ("host:port"). Nothing connects
  // until the first AllGather, which runs on the exchange thread and can be cancelled.
  TcpReportTransport(TcpTransportOptions options, std::unique_ptr<TcpListener> listener,
                     std::string hub_address);
  ~TcpReportTransport() override;

  // After a failure the connections are closed (the other ranks see it) and every later gather
  // is Cancelled.
  absl::StatusOr<std::vector<double>> AllGather(absl::Span<const double> mine) override;
  void Cancel() override { cancelled_ = true; }

 private:
  absl::StatusOr<std::vector<double>> GatherOnce(absl::Span<const double> mine);
  absl::Status Connect();
  absl::Status SendAll(int fd, const void* data, size_t bytes);
  absl::Status ReceiveAll(int fd, void* data, size_t bytes, int peer);

  TcpTransportOptions options_;
  std::unique_ptr<TcpListener> listener_;  // rank 0
  std::string hub_address_;                // the others
  std::vector<int> peers_;                 // rank 0: fd per rank (-1 for itself); others: [hub]
  bool connected_ = false;
  std::atomic<bool> cancelled_{false};
};

}  // namespace stragglar
