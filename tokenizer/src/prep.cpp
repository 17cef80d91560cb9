#include "scaleguard/token_prep.h"

#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

namespace scaleguard::tokenizer {
namespace {

// The token file layouts `scaleguard-run train` reads (runner/src/data/tokens.h).
constexpr char kSgMagic[8] = {'S', 'G', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr uint32_t kSgVersion = 1;
constexpr size_t kSgHeaderBytes = 32;
constexpr size_t kLlmcHeaderBytes = 256 * 4;
constexpr int32_t kLlmcMagicU16 = 20240520, kLlmcVersionU16 = 1;
constexpr int32_t kLlmcMagicU32 = 20240801, kLlmcVersionU32 = 7;
constexpr size_t kChunkBytes = 256 << 10;           // documents handed to a thread at once
constexpr size_t kMaxLineBytes = size_t{1} << 30;   // one JSONL document

std::string sys_error() { return std::strerror(errno); }

bool is_jsonl(const std::string& path) {
  for (const char* ext : {".jsonl", ".json", ".ndjson"}) {
    const size_t n = std::strlen(ext);
    if (path.size() > n && path.compare(path.size() - n, n, ext) == 0) return true;
  }
  return false;
}

struct Chunk {
  // In: documents as spans of `text`; for JSONL each a line (its number for errors).
  std::string file;
  bool jsonl = false;
  std::string text;
  std::vector<std::pair<size_t, size_t>> docs;
  std::vector<uint64_t> lines;
  // Out.
  std::vector<uint32_t> tokens;
  std::vector<uint32_t> doc_tokens;
  uint64_t skipped = 0, replaced = 0;
  std::exception_ptr error;
  bool done = false;
};

// Reads the inputs into chunks of about kChunkBytes, in order.
class Reader {
 public:
  explicit Reader(const std::vector<std::string>& inputs) : inputs_(inputs) {}
  uint64_t bytes() const { return bytes_; }

  std::unique_ptr<Chunk> next() {
    while (file_ < inputs_.size()) {
      const std::string& path = inputs_[file_];
      if (!in_.is_open()) {
        in_.open(path, std::ios::binary);
        if (!in_) throw Error("cannot read '" + path + "': " + sys_error());
        line_ = 0;
      }
      auto c = std::make_unique<Chunk>();
      c->file = path;
      c->jsonl = is_jsonl(path);
      if (!c->jsonl) {  // the whole file is one document
        c->text.assign(std::istreambuf_iterator<char>(in_), std::istreambuf_iterator<char>());
        if (in_.bad()) throw Error("error reading '" + path + "': " + sys_error());
        c->docs.push_back({0, c->text.size()});
        c->lines.push_back(1);
        finish_file();
      } else {
        std::string line;
        while (c->text.size() < kChunkBytes && std::getline(in_, line)) {
          ++line_;
          if (line.size() > kMaxLineBytes)
            throw Error(path + ":" + std::to_string(line_) + ": a line of more than 1 GiB");
          bytes_ += line.size() + 1;
          c->docs.push_back({c->text.size(), line.size()});
          c->lines.push_back(line_);
          c->text += line;
        }
        if (in_.bad()) throw Error("error reading '" + path + "': " + sys_error());
        if (in_.eof()) finish_file();
      }
      if (!c->jsonl) bytes_ += c->text.size();
      if (!c->docs.empty()) return c;
    }
    return nullptr;
  }

 private:
  void finish_file() {
    in_.close();
    in_.clear();
    ++file_;
  }
  const std::vector<std::string>& inputs_;
  size_t file_ = 0;
  uint64_t line_ = 0, bytes_ = 0;
  std::ifstream in_;
};

void tokenize_chunk(Chunk& c, Encoder& enc, const std::string& field, std::optional<uint32_t> eos) {
  std::string json_text, repaired;
  for (size_t d = 0; d < c.docs.size(); ++d) {
    std::string_view text(c.text.data() + c.docs[d].first, c.docs[d].second);
    const std::string where = c.file + ":" + std::to_string(c.lines[d]);
    if (c.jsonl) {
      if (text.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // a blank line
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        throw Error(where + ": not a JSON document (" + e.what() + ")");
      }
      if (!j.is_object() || !j.contains(field) || !j.at(field).is_string())
        throw Error(where + ": no string field '" + field + "' (choose the field with --field)");
      json_text = j.at(field).get<std::string>();
      text = json_text;
    }
    if (text.empty()) {
      ++c.skipped;
      continue;
    }
    if (const uint64_t n = repair_utf8(text, repaired)) {
      c.replaced += n;
      text = repaired;
    }
    const size_t before = c.tokens.size();
    try {
      enc.encode(text, c.tokens);
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
    if (eos) c.tokens.push_back(*eos);
    c.doc_tokens.push_back(static_cast<uint32_t>(c.tokens.size() - before));
  }
}

std::optional<uint32_t> choose_eos(const Tokenizer& tok, const std::string& eos) {
  if (eos == "none") return std::nullopt;
  if (eos.empty()) {
    if (auto id = tok.eos()) return id;
    throw Error("the tokenizer (" + tok.describe() +
                ") names no end-of-document token; choose one with --eos TOKEN, or --eos none");
  }
  if (auto id = tok.token_id(eos)) return id;
  if (eos.find_first_not_of("0123456789") == std::string::npos && eos.size() < 11) {
    const uint64_t id = std::stoull(eos);
    if (id < tok.vocab_size()) return static_cast<uint32_t>(id);
  }
  throw Error("--eos '" + eos + "' is neither a token of the tokenizer nor an id below " +
              std::to_string(tok.vocab_size()));
}

class Output {
 public:
  Output(const std::string& path, size_t header) : path_(path), tmp_(path + ".tmp") {
    out_.open(tmp_, std::ios::binary | std::ios::trunc);
    if (!out_) throw Error("cannot write '" + tmp_ + "': " + sys_error());
    std::vector<char> zeros(header, '\0');
    write(zeros.data(), zeros.size());
  }
  void write(const void* p, size_t n) { out_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n)); }
  void patch_header(const void* p, size_t n) {
    out_.seekp(0);
    write(p, n);
  }
  void commit() {
    out_.close();
    if (!out_) throw Error("error writing '" + tmp_ + "' (disk full?)");
    // Renamed last: a reader never sees a half-written file under the final name.
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
      throw Error("cannot rename '" + tmp_ + "' to '" + path_ + "': " + sys_error());
  }
  ~Output() {
    if (out_.is_open()) {
      out_.close();
      std::remove(tmp_.c_str());
    }
  }

 private:
  std::string path_, tmp_;
  std::ofstream out_;
};

}  // namespace

PrepStats prep(const Tokenizer& tok, const PrepOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.inputs.empty()) throw Error("no --input files");
  if (o.format != "sg" && o.format != "llmc" && o.format != "llmc-u32" && o.format != "megatron")
    throw Error("unknown --format '" + o.format + "' (sg | llmc | llmc-u32 | megatron)");
  const uint32_t vocab = tok.vocab_size();
  uint32_t width = vocab <= 65536 ? 2 : 4;
  if (o.format == "llmc-u32") width = 4;
  if (o.format == "megatron") width = vocab < 65500 ? 2 : 4;  // Megatron's __best_fitting_dtype
  if (o.format == "sg" && width != 2)
    throw Error("--format sg holds at most 65536 token ids, the tokenizer has " + std::to_string(vocab) +
                "; use --format llmc or megatron");
  const std::optional<uint32_t> eos = choose_eos(tok, o.eos);

  PrepStats stats;
  stats.threads = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  stats.token_bytes = width;

  std::string prefix = o.output;  // megatron: PREFIX.bin + PREFIX.idx
  if (o.format == "megatron" && prefix.size() > 4 &&
      (prefix.compare(prefix.size() - 4, 4, ".bin") == 0 || prefix.compare(prefix.size() - 4, 4, ".idx") == 0))
    prefix.resize(prefix.size() - 4);
  const size_t header = o.format == "sg" ? kSgHeaderBytes : o.format == "megatron" ? 0 : kLlmcHeaderBytes;
  Output out(o.format == "megatron" ? prefix + ".bin" : o.output, header);
  std::vector<uint32_t> doc_lengths;  // megatron's index

  // Workers take chunks from `todo`; this thread reads ahead (a bounded window) and writes
  // the chunks in input order as they finish.
  std::mutex mu;
  std::condition_variable work_cv, done_cv;
  std::deque<Chunk*> todo;
  bool stop = false;
  std::vector<std::thread> workers;
  auto worker = [&] {
    std::unique_ptr<Encoder> enc;
    std::exception_ptr setup_error;
    try {
      enc = tok.encoder();
    } catch (...) {
      setup_error = std::current_exception();
    }
    for (;;) {
      Chunk* c;
      {
        std::unique_lock<std::mutex> lock(mu);
        work_cv.wait(lock, [&] { return stop || !todo.empty(); });
        if (stop && todo.empty()) return;
        c = todo.front();
        todo.pop_front();
      }
      try {
        if (setup_error) std::rethrow_exception(setup_error);
        tokenize_chunk(*c, *enc, o.field, eos);
      } catch (...) {
        c->error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        c->done = true;
      }
      done_cv.notify_all();
    }
  };
  for (unsigned i = 0; i < stats.threads; ++i) workers.emplace_back(worker);
  auto stop_workers = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
      todo.clear();  // unstarted chunks are dropped (only an error stops early)
    }
    work_cv.notify_all();
    for (auto& w : workers) w.join();  // each finishes the chunk it holds
    workers.clear();
  };

  std::deque<std::unique_ptr<Chunk>> window;  // outlives the workers
  try {
    Reader reader(o.inputs);
    bool more = true;
    std::vector<uint16_t> narrow;
    while (more || !window.empty()) {
      while (more && window.size() < 2 * stats.threads) {
        auto c = reader.next();
        if (!c) {
          more = false;
          break;
        }
        {
          std::lock_guard<std::mutex> lock(mu);
          todo.push_back(c.get());
        }
        work_cv.notify_one();
        window.push_back(std::move(c));
      }
      if (window.empty()) break;
      Chunk& c = *window.front();
      {
        std::unique_lock<std::mutex> lock(mu);
        done_cv.wait(lock, [&] { return c.done; });
      }
      if (c.error) std::rethrow_exception(c.error);
      if (width == 2) {
        narrow.assign(c.tokens.begin(), c.tokens.end());
        out.write(narrow.data(), narrow.size() * 2);
      } else {
        out.write(c.tokens.data(), c.tokens.size() * 4);  // little endian, as the readers expect
      }
      stats.tokens += c.tokens.size();
      stats.documents += c.doc_tokens.size();
      stats.skipped_empty += c.skipped;
      stats.replaced_utf8 += c.replaced;
      if (o.format == "megatron") doc_lengths.insert(doc_lengths.end(), c.doc_tokens.begin(), c.doc_tokens.end());
      window.pop_front();
    }
    stats.input_bytes = reader.bytes();
  } catch (...) {
    stop_workers();
    throw;
  }
  stop_workers();
  if (stats.tokens == 0) throw Error("the inputs hold no text");

  if (o.format == "sg") {
    char h[kSgHeaderBytes] = {};
    std::memcpy(h, kSgMagic, 8);
    std::memcpy(h + 8, &kSgVersion, 4);
    std::memcpy(h + 12, &width, 4);
    std::memcpy(h + 16, &stats.tokens, 8);
    out.patch_header(h, sizeof h);
  } else if (o.format != "megatron") {
    // llm.c's reader takes the count from an int32.
    if (stats.tokens >= (uint64_t{1} << 31))
      throw Error(std::to_string(stats.tokens) + " tokens do not fit llm.c's int32 token count; split the inputs "
                  "or use --format megatron");
    const int32_t h[3] = {width == 2 ? kLlmcMagicU16 : kLlmcMagicU32, width == 2 ? kLlmcVersionU16 : kLlmcVersionU32,
                          static_cast<int32_t>(stats.tokens)};
    out.patch_header(h, sizeof h);
  }
  out.commit();
  stats.written.push_back(o.format == "megatron" ? prefix + ".bin" : o.output);

  if (o.format == "megatron") {
    // Megatron-LM's MMIDIDX index: one sequence per document, back to back.
    Output idx(prefix + ".idx", 0);
    const char magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
    const uint64_t version = 1, sequences = doc_lengths.size(), documents = sequences + 1;
    const uint8_t dtype = width == 2 ? 8 : 4;  // uint16 : int32
    idx.write(magic, 9);
    idx.write(&version, 8);
    idx.write(&dtype, 1);
    idx.write(&sequences, 8);
    idx.write(&documents, 8);
    idx.write(doc_lengths.data(), doc_lengths.size() * 4);
    std::vector<int64_t> pointers(doc_lengths.size());
    int64_t at = 0;
    for (size_t i = 0; i < doc_lengths.size(); ++i) pointers[i] = at, at += int64_t{doc_lengths[i]} * width;
    idx.write(pointers.data(), pointers.size() * 8);
    std::vector<int64_t> doc_index(documents);
    for (uint64_t i = 0; i < documents; ++i) doc_index[i] = static_cast<int64_t>(i);
    idx.write(doc_index.data(), doc_index.size() * 8);
    idx.commit();
    stats.written.push_back(prefix + ".idx");
  }
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace scaleguard::tokenizer
