// The few collectives the commit protocol needs, behind an interface so the runner can pass
// its own communicator. Every call is collective: all ranks call it, in the same order, from
// the thread that runs training's collectives (the main thread).
#pragma once
#include <mpi.h>

#include <string>
#include <vector>

namespace scaleguard::ckpt {

class CommitComm {
 public:
  virtual ~CommitComm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Minimum of `value` over all ranks.
  virtual int all_min(int value) = 0;
  // Rank 0 receives every rank's text (index = rank); the others receive an empty vector.
  virtual std::vector<std::string> gather(const std::string& text) = 0;
  // Every rank receives rank 0's text.
  virtual std::string broadcast(const std::string& text) = 0;
};

// CommitComm over MPI. It duplicates the given communicator so checkpoint messages can never
// match training's; construct and destroy it collectively, before MPI_Finalize.
class MpiCommitComm : public CommitComm {
 public:
  explicit MpiCommitComm(MPI_Comm comm);
  ~MpiCommitComm() override;
  MpiCommitComm(const MpiCommitComm&) = delete;
  MpiCommitComm& operator=(const MpiCommitComm&) = delete;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int all_min(int value) override;
  std::vector<std::string> gather(const std::string& text) override;
  std::string broadcast(const std::string& text) override;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace scaleguard::ckpt
