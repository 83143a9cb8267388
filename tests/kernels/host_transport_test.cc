// The in-process transport on its own: FIFO channels, copies and loans, timeouts that name both
// ranks, and aborts that wake every waiter without freeing memory a reader still holds.
#include "kernels/exec/host/host_transport.h"

#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stragglar {
namespace {

using Bytes = std::vector<std::byte>;
using ::testing::HasSubstr;

Bytes BytesOf(std::initializer_list<int> values) {
  Bytes bytes;
  for (int value : values) bytes.push_back(static_cast<std::byte>(value));
  return bytes;
}

TEST(HostTransportTest, ChannelsAreFifoAndIndependent) {
  HostTransport transport(3);
  transport.Send(0, 1, BytesOf({1}));
  transport.Send(0, 1, BytesOf({2, 3}));
  transport.Send(2, 1, BytesOf({9}));
  const Bytes first = BytesOf({4});
  const Bytes second = BytesOf({5, 6});
  transport.SendGather(0, 1, {absl::Span<const std::byte>(first), second});
  EXPECT_EQ(*transport.Receive(2, 1, absl::Seconds(1)), BytesOf({9}));
  EXPECT_EQ(*transport.Receive(0, 1, absl::Seconds(1)), BytesOf({1}));
  EXPECT_EQ(*transport.Receive(0, 1, absl::Seconds(1)), BytesOf({2, 3}));
  EXPECT_EQ(*transport.Receive(0, 1, absl::Seconds(1)), BytesOf({4, 5, 6}));
  // 1 -> 0 is a different channel from 0 -> 1.
  EXPECT_EQ(transport.Receive(1, 0, absl::Milliseconds(1)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(HostTransportTest, SendCopiesThePayload) {
  HostTransport transport(2);
  Bytes payload = BytesOf({1, 2});
  transport.Send(1, 0, payload);
  payload[0] = std::byte{99};
  EXPECT_EQ(*transport.Receive(1, 0, absl::Seconds(1)), BytesOf({1, 2}));
}

TEST(HostTransportTest, ReceiveTimeoutNamesBothRanks) {
  HostTransport transport(6);
  const absl::StatusOr<Bytes> message = transport.Receive(5, 3, absl::Milliseconds(20));
  EXPECT_EQ(message.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(message.status().message(),
              HasSubstr("rank 3 waited 20ms for a message from rank 5"));
}

TEST(HostTransportTest, ReceiveWaitsForALateSend) {
  HostTransport transport(2);
  std::thread sender([&] {
    absl::SleepFor(absl::Milliseconds(20));
    transport.Send(0, 1, BytesOf({7}));
  });
  EXPECT_EQ(*transport.Receive(0, 1, absl::Seconds(30)), BytesOf({7}));
  sender.join();
}

TEST(HostTransportTest, AbortWakesAWaitingReceiverWithTheFirstReason) {
  HostTransport transport(4);
  std::atomic<bool> receiving = false;
  absl::StatusOr<Bytes> message;
  const absl::Time start = absl::Now();
  std::thread receiver([&] {
    receiving = true;
    message = transport.Receive(2, 1, absl::Seconds(60));
  });
  while (!receiving) absl::SleepFor(absl::Milliseconds(1));
  absl::SleepFor(absl::Milliseconds(20));
  transport.Abort(absl::InternalError("rank 2 crashed"));
  transport.Abort(absl::InternalError("a later reason"));
  receiver.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  EXPECT_EQ(message.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(message.status().message(), HasSubstr("rank 2 crashed"));
  EXPECT_THAT(message.status().message(), ::testing::Not(HasSubstr("a later reason")));
  // Later receives fail at once, even where a message was queued after the abort.
  transport.Send(0, 3, BytesOf({1}));
  EXPECT_EQ(transport.Receive(0, 3, absl::Seconds(60)).status().code(), absl::StatusCode::kAborted);
}

TEST(HostTransportTest, LentMemoryIsReadInPlaceAndReturnedInOrder) {
  HostTransport transport(2);
  Bytes first = BytesOf({1, 2}), second = BytesOf({3});
  const Bytes header = BytesOf({42});
  const int64_t ticket0 =
      transport.Lend(0, 1, header, {absl::Span<const std::byte>(first), second});
  const int64_t ticket1 = transport.Lend(0, 1, {}, {absl::Span<const std::byte>(second)});
  EXPECT_EQ(ticket1, ticket0 + 1);
  // Nothing has been read yet: the sender must not reuse its memory.
  EXPECT_EQ(transport.WaitReturned(0, 1, ticket0, absl::ZeroDuration()).code(),
            absl::StatusCode::kDeadlineExceeded);
  absl::StatusOr<HostTransport::BorrowedMessage> borrowed =
      transport.Borrow(0, 1, absl::Seconds(1));
  ASSERT_TRUE(borrowed.ok()) << borrowed.status();
  EXPECT_EQ(Bytes(borrowed->header.begin(), borrowed->header.end()), header);
  ASSERT_EQ(borrowed->spans.size(), 2u);
  // The spans are the sender's memory, not a copy.
  EXPECT_EQ(borrowed->spans[0].data(), first.data());
  EXPECT_EQ(borrowed->spans[1].data(), second.data());
  transport.Return(0, 1);
  EXPECT_TRUE(transport.WaitReturned(0, 1, ticket0, absl::ZeroDuration()).ok());
  EXPECT_EQ(transport.WaitReturned(0, 1, ticket1, absl::Milliseconds(1)).code(),
            absl::StatusCode::kDeadlineExceeded);
  // Receive copies a lent message and returns it at once.
  second[0] = std::byte{8};
  EXPECT_EQ(*transport.Receive(0, 1, absl::Seconds(1)), BytesOf({8}));
  EXPECT_TRUE(transport.WaitReturned(0, 1, ticket1, absl::ZeroDuration()).ok());
}

TEST(HostTransportTest, WaitReturnedTimeoutNamesBothRanks) {
  HostTransport transport(4);
  const Bytes data = BytesOf({1});
  const int64_t ticket = transport.Lend(3, 1, {}, {absl::Span<const std::byte>(data)});
  const absl::Status status = transport.WaitReturned(3, 1, ticket, absl::Milliseconds(10));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("rank 3 waited 10ms for rank 1 to read its data"));
}

// After an abort a lender may free its memory once nobody reads it: at once for messages never
// borrowed, only after the Return for one being read.
TEST(HostTransportTest, AbortEndsLoansButWaitsForAReaderToFinish) {
  HostTransport transport(3);
  const Bytes data = BytesOf({5});
  const int64_t unread = transport.Lend(0, 2, {}, {absl::Span<const std::byte>(data)});
  const int64_t being_read = transport.Lend(0, 1, {}, {absl::Span<const std::byte>(data)});
  ASSERT_TRUE(transport.Borrow(0, 1, absl::Seconds(1)).ok());
  transport.Abort(absl::InternalError("rank 2 crashed"));
  const absl::Status dropped = transport.WaitReturned(0, 2, unread, absl::Seconds(30));
  EXPECT_EQ(dropped.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(dropped.message(), HasSubstr("rank 2 crashed"));
  EXPECT_EQ(transport.WaitReturned(0, 1, being_read, absl::Milliseconds(10)).code(),
            absl::StatusCode::kDeadlineExceeded);
  std::atomic<bool> returned = false;
  std::thread reader([&] {
    absl::SleepFor(absl::Milliseconds(20));
    returned = true;
    transport.Return(0, 1);
  });
  EXPECT_TRUE(transport.WaitReturned(0, 1, being_read, absl::Seconds(30)).ok());
  EXPECT_TRUE(returned);
  reader.join();
}

TEST(HostTransportTest, EmulatedNodesDelayOnlyMessagesBetweenNodes) {
  // 2 nodes of 2 ranks; between them 200 ms per message plus 1 MB/s (100 kB: 100 ms). The delays
  // are large so that only lower bounds need asserting, whatever the machine's load; the one upper
  // bound (inside a node) has 150 ms of slack.
  HostTransport transport(4);
  ASSERT_TRUE(
      transport.EmulateNodes({.ranks_per_node = 2, .alpha_s = 0.2, .bytes_per_s = 1e6}).ok());
  const std::vector<std::byte> payload(100000, std::byte{7});
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  // Inside a node: at once.
  Clock::time_point start = Clock::now();
  transport.Send(0, 1, payload);
  ASSERT_TRUE(transport.Receive(0, 1, absl::Seconds(5)).ok());
  EXPECT_LT(seconds_since(start), 0.15);
  // Between nodes: not before alpha + bytes / bandwidth, and the bytes intact.
  start = Clock::now();
  transport.Send(0, 2, payload);
  absl::StatusOr<std::vector<std::byte>> received = transport.Receive(0, 2, absl::Seconds(5));
  ASSERT_TRUE(received.ok());
  EXPECT_GE(seconds_since(start), 0.3);
  EXPECT_EQ(*received, payload);
  // One NIC per rank: two messages from rank 1 to both ranks of node 1 leave one after the other,
  // so the second is readable no earlier than 2 * 100 ms + 200 ms after they were sent.
  start = Clock::now();
  transport.Send(1, 2, payload);
  transport.Send(1, 3, payload);
  ASSERT_TRUE(transport.Receive(1, 3, absl::Seconds(5)).ok());
  EXPECT_GE(seconds_since(start), 0.4);
  ASSERT_TRUE(transport.Receive(1, 2, absl::Seconds(5)).ok());
  // A timeout shorter than the delivery is a timeout.
  transport.Send(2, 0, payload);
  EXPECT_EQ(transport.Receive(2, 0, absl::Milliseconds(5)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(transport.Receive(2, 0, absl::Seconds(5)).ok());
}

TEST(HostTransportTest, BadNodeEmulationIsRefused) {
  HostTransport transport(4);
  EXPECT_FALSE(transport.EmulateNodes({.ranks_per_node = 0, .bytes_per_s = 1}).ok());
  EXPECT_FALSE(transport.EmulateNodes({.ranks_per_node = 5, .bytes_per_s = 1}).ok());
  EXPECT_FALSE(transport.EmulateNodes({.ranks_per_node = 2, .alpha_s = -1, .bytes_per_s = 1}).ok());
  EXPECT_FALSE(transport.EmulateNodes({.ranks_per_node = 2, .bytes_per_s = 0}).ok());
  // Nothing changed: messages between "nodes" are not delayed.
  const auto start = std::chrono::steady_clock::now();
  transport.Send(0, 3, std::vector<std::byte>(1000));
  ASSERT_TRUE(transport.Receive(0, 3, absl::Seconds(5)).ok());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.5);
}

}  // namespace
}  // namespace stragglar
