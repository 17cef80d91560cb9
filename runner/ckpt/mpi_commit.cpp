#include "ckpt/commit_comm.h"

namespace scaleguard::ckpt {

MpiCommitComm::MpiCommitComm(MPI_Comm comm) {
  MPI_Comm_dup(comm, &comm_);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommitComm::~MpiCommitComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

int MpiCommitComm::all_min(int value) {
  int out = value;
  MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_MIN, comm_);
  return out;
}

std::vector<std::string> MpiCommitComm::gather(const std::string& text) {
  int len = static_cast<int>(text.size());
  std::vector<int> lens(rank_ == 0 ? size_ : 0);
  MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm_);
  std::vector<int> displs(lens.size());
  int total = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    displs[i] = total;
    total += lens[i];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Gatherv(text.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0, comm_);
  std::vector<std::string> out;
  for (size_t i = 0; i < lens.size(); ++i) out.push_back(all.substr(displs[i], lens[i]));
  return out;
}

std::string MpiCommitComm::broadcast(const std::string& text) {
  int len = static_cast<int>(text.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, comm_);
  std::string out = rank_ == 0 ? text : std::string(static_cast<size_t>(len), '\0');
  MPI_Bcast(out.data(), len, MPI_CHAR, 0, comm_);
  return out;
}

}  // namespace scaleguard::ckpt
