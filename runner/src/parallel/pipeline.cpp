#include "parallel/pipeline.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <string>

#include "timing/step_timer.h"

namespace scaleguard::run {
namespace {

// One tag per direction: messages between two stages in one direction arrive in the order
// sent (MPI's non-overtaking rule), so micro-batch order needs no tag of its own.
constexpr int kTagForward = 0;
constexpr int kTagBackward = 1;

}  // namespace

StageCosts stage_costs(const Config& cfg) {
  const double C = static_cast<double>(cfg.n_embd), T = static_cast<double>(cfg.seq_len),
               V = static_cast<double>(cfg.vocab_size);
  StageCosts c;
  c.embedding = 2 * C;
  c.block = 24 * C * C + 4 * T * C;
  if (cfg.model == "llama") {  // q, o: 2C^2 each; k, v: 2 C KV D each; gate, up, down: 2 C F each
    const double kv = static_cast<double>(cfg.n_kv_head * (cfg.n_embd / cfg.n_head)),
                 F = static_cast<double>(cfg.ffn_hidden);
    c.block = 4 * C * C + 4 * C * kv + 6 * C * F + 4 * T * C;
  }
  c.head = 2 * C * V + V;
  return c;
}

std::vector<int64_t> split_stages(const StageCosts& costs, int64_t n_layer, int pp) {
  if (pp < 1 || pp > n_layer)
    throw RunError("cannot split " + std::to_string(n_layer) + " GPT blocks into pp=" + std::to_string(pp) +
                   " stages of at least one block each");
  // cost(s, a, b): stage s running blocks [a, b).
  auto cost = [&](int s, int64_t a, int64_t b) {
    double c = static_cast<double>(b - a) * costs.block;
    if (s == 0) c += costs.embedding;
    if (s == pp - 1) c += costs.head;
    return c;
  };
  // best[s][b]: the smallest possible maximum stage cost when stages 0..s-1 run blocks [0, b).
  const double inf = std::numeric_limits<double>::infinity();
  const size_t L = static_cast<size_t>(n_layer);
  std::vector<std::vector<double>> best(static_cast<size_t>(pp) + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int64_t>> from(static_cast<size_t>(pp) + 1, std::vector<int64_t>(L + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= pp; ++s)
    for (int64_t b = s; b <= n_layer; ++b)
      for (int64_t a = s - 1; a < b; ++a) {
        double v = std::max(best[static_cast<size_t>(s - 1)][static_cast<size_t>(a)], cost(s - 1, a, b));
        // Strictly better only: among equal maxima the earliest cut wins, so every rank
        // computes the same split.
        if (v < best[static_cast<size_t>(s)][static_cast<size_t>(b)]) {
          best[static_cast<size_t>(s)][static_cast<size_t>(b)] = v;
          from[static_cast<size_t>(s)][static_cast<size_t>(b)] = a;
        }
      }
  std::vector<int64_t> bounds(static_cast<size_t>(pp) + 1);
  bounds[static_cast<size_t>(pp)] = n_layer;
  for (int s = pp; s > 0; --s)
    bounds[static_cast<size_t>(s - 1)] = from[static_cast<size_t>(s)][static_cast<size_t>(bounds[static_cast<size_t>(s)])];
  return bounds;
}

Pipeline::Pipeline(const Config& cfg, ProcessGrid& grid, LanguageModel& model, at::Device device)
    : cfg_(cfg),
      grid_(grid),
      model_(model),
      device_(device),
      // Stage-to-stage tensors travel in the compute dtype: a stage's output and its input
      // gradient are bf16 under --precision bf16, so half the bytes of fp32 and the same values.
      wire_dtype_(cfg.precision == "bf16" ? at::kBFloat16 : at::kFloat) {}

at::Tensor Pipeline::activation_buffer() const {
  return at::empty({cfg_.micro_batch, cfg_.seq_len, cfg_.n_embd}, at::TensorOptions(wire_dtype_).device(device_));
}

at::Tensor Pipeline::recv_forward() {
  at::Tensor a = activation_buffer();
  grid_.pp_group->recv(a, grid_.pp_rank - 1, kTagForward);
  return a.requires_grad_(true);
}

void Pipeline::send_forward(const at::Tensor& activations, PipelineStep& out) {
  grid_.pp_group->send(activations.detach().contiguous(), grid_.pp_rank + 1, kTagForward);
  out.send_bytes += activations.nbytes();
}

at::Tensor Pipeline::recv_backward() {
  at::Tensor g = activation_buffer();
  grid_.pp_group->recv(g, grid_.pp_rank + 1, kTagBackward);
  return g;
}

void Pipeline::send_backward(const InFlight& f, PipelineStep& out) {
  grid_.pp_group->send(f.input.grad().contiguous(), grid_.pp_rank - 1, kTagBackward);
  out.send_bytes += f.input.grad().nbytes();
}

void Pipeline::exchange(const std::vector<P2P>& ops, PipelineStep& out) {
  grid_.pp_group->batch_p2p(ops);
  for (const P2P& op : ops)
    if (op.send) out.send_bytes += op.t.nbytes();
}

Pipeline::InFlight Pipeline::forward(int64_t u, at::Tensor input,
                                     const std::function<std::pair<at::Tensor, at::Tensor>(int64_t)>& batch,
                                     double scale, PipelineStep& out, bool send) {
  InFlight f;
  std::pair<at::Tensor, at::Tensor> xy;
  if (grid_.first_stage() || grid_.last_stage()) xy = batch(u);
  f.input = grid_.first_stage() ? xy.first : std::move(input);
  {
    TimedInterval busy(Timed::kPipelineBusy);
    if (grid_.last_stage()) {
      at::Tensor l = model_.loss(f.input, xy.second);
      out.loss_sum += l.detach().item<double>();
      f.output = l * scale;
    } else {
      f.output = model_.forward(f.input);
    }
  }
  if (send && !grid_.last_stage()) send_forward(f.output, out);
  return f;
}

void Pipeline::backward(int64_t u, InFlight& f, const at::Tensor& grad,
                        const std::function<void(int64_t)>& before_backward, PipelineStep& /*out*/) {
  before_backward(u);
  TimedInterval busy(Timed::kPipelineBusy);
  if (grid_.last_stage()) f.output.backward();
  else f.output.backward(grad);
}

PipelineStep Pipeline::run(const std::function<std::pair<at::Tensor, at::Tensor>(int64_t)>& batch,
                           const std::function<void(int64_t)>& before_backward, double scale) {
  PipelineStep out;
  TimedInterval total(Timed::kPipeline);
  const int64_t m = cfg_.micro_batches;
  const bool first = grid_.first_stage(), last = grid_.last_stage();
  // Sends are blocking (a large message waits for its receive), so each pair of
  // neighbours must post matching operations in the same order. Both schedules below
  // keep that order: between stages s and s+1, s sends activations before it waits for a
  // gradient, and s+1 receives the next activations before it sends a gradient back.
  // The input of a forward: received from the stage before (none on the first stage).
  auto next_input = [&] { return first ? at::Tensor() : recv_forward(); };
  // Backward of f, then its input gradient to the stage before.
  auto backward_and_send = [&](int64_t u, InFlight& f) {
    backward(u, f, last ? at::Tensor() : recv_backward(), before_backward, out);
    if (!first) send_backward(f, out);
    f = InFlight{};  // free the activations as soon as they are done with
  };
  std::vector<InFlight> live(static_cast<size_t>(m));
  if (cfg_.schedule == "gpipe") {
    // All forwards, then all backwards in the same micro-batch order.
    for (int64_t u = 0; u < m; ++u) live[static_cast<size_t>(u)] = forward(u, next_input(), batch, scale, out);
    for (int64_t u = 0; u < m; ++u) backward_and_send(u, live[static_cast<size_t>(u)]);
  } else {
    // 1F1B: stage s runs pp-1-s warm-up forwards, then alternates one forward and one
    // backward, then drains the remaining backwards. At most pp-s micro-batches are in
    // flight, instead of all m with GPipe.
    const int64_t warmup = std::min<int64_t>(grid_.pp - 1 - grid_.pp_rank, m);
    int64_t u = 0, done = 0;
    for (; u < warmup; ++u) live[static_cast<size_t>(u)] = forward(u, next_input(), batch, scale, out);
    at::Tensor input = u < m ? next_input() : at::Tensor();
    // Steady state: each exchange with a neighbour is one batch_p2p (one NCCL group, so
    // the send and the receive progress together; MPI runs them in the order listed,
    // which is the blocking order above).
    const int next = grid_.pp_rank + 1, prev = grid_.pp_rank - 1;
    for (; u < m; ++u) {
      InFlight& fresh = live[static_cast<size_t>(u)];
      fresh = forward(u, std::move(input), batch, scale, out, /*send=*/false);
      at::Tensor grad;
      if (!last) {  // this forward's activations out, the oldest micro-batch's gradient in
        grad = activation_buffer();
        exchange({{true, fresh.output.detach().contiguous(), next, kTagForward}, {false, grad, next, kTagBackward}},
                 out);
      }
      InFlight& f = live[static_cast<size_t>(done)];
      backward(done, f, grad, before_backward, out);
      // The next forward's input is received before this gradient leaves: the stage
      // before sends it first (see above).
      std::vector<P2P> ops;
      at::Tensor received;
      if (!first && u + 1 < m) {
        received = activation_buffer();
        ops.push_back({false, received, prev, kTagForward});
      }
      if (!first) ops.push_back({true, f.input.grad().contiguous(), prev, kTagBackward});
      exchange(ops, out);
      input = received.defined() ? received.requires_grad_(true) : at::Tensor();
      f = InFlight{};
      ++done;
    }
    for (; done < m; ++done) backward_and_send(done, live[static_cast<size_t>(done)]);
  }
  return out;
}

double Pipeline::evaluate(int64_t micro_batches,
                          const std::function<std::pair<at::Tensor, at::Tensor>(int64_t)>& batch) {
  PipelineStep out;
  for (int64_t u = 0; u < micro_batches; ++u)
    forward(u, grid_.first_stage() ? at::Tensor() : recv_forward(), batch, 1.0, out);
  return out.loss_sum;
}

std::vector<std::pair<std::string, at::Tensor>> gather_parameters(const FlatLayout& layout, const LanguageModel& model,
                                                                  Communicator& pp_group, Communicator* tp_group) {
  // This stage's parameters as one float buffer on the training device, and a text index
  // "name dim dim...\n" on the host. The indexes travel as host metadata (all_gather_host,
  // never through NCCL); each stage then broadcasts its buffer, on the device, in turn
  // (issue 15: no CPU tensor is handed to the pp group).
  const at::TensorOptions opts = layout.buckets().front().params.options().dtype(at::kFloat);
  std::string index;
  std::vector<at::Tensor> mine;
  for (const auto& p : layout.params()) {
    if (model.holds_tied_copy() && is_tied_embedding(p.name)) continue;
    // Under tensor parallel the whole tensor from this stage's tp slices (collective over
    // the tp group, in the same parameter order on every tp rank).
    const at::Tensor whole = tp_group && tp_group->size() > 1 ? gather_slices(p.param.detach(), p.slice, *tp_group)
                                                               : p.param.detach();
    index += p.name;
    for (int64_t d : whole.sizes()) index += " " + std::to_string(d);
    index += "\n";
    mine.push_back(whole.to(at::kFloat).reshape({-1}));
  }
  at::Tensor flat = mine.empty() ? at::empty({0}, opts) : at::cat(mine);
  const std::vector<std::string> indexes = pp_group.all_gather_host(index);
  std::vector<std::pair<std::string, at::Tensor>> all;
  for (int r = 0; r < pp_group.size(); ++r) {
    struct Entry { std::string name; std::vector<int64_t> shape; };
    std::vector<Entry> entries;
    int64_t numel = 0;
    std::istringstream lines(indexes[static_cast<size_t>(r)]);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      Entry e;
      fields >> e.name;
      for (int64_t d; fields >> d;) e.shape.push_back(d);
      numel += c10::multiply_integers(e.shape);
      entries.push_back(std::move(e));
    }
    at::Tensor data = r == pp_group.rank() ? flat : at::empty({numel}, opts);
    if (numel > 0) pp_group.broadcast(data, r)->wait();  // every rank knows numel: all skip alike
    int64_t offset = 0;
    for (const Entry& e : entries) {
      at::Tensor t = data.narrow(0, offset, c10::multiply_integers(e.shape)).view(e.shape);
      offset += t.numel();
      all.emplace_back(e.name, t);
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return all;
}

}  // namespace scaleguard::run
