// Formatting helpers shared by the report renderers (report_render.cpp, report_html.cpp,
// report_decisions_render.cpp): numbers, table cells, CSV fields, HTML escaping, the HTML
// page's style and the SVG primitives, so both reports look and escape alike.
// Internal to the report library.
#pragma once
#include <cstdio>
#include <string>

namespace scaleguard::report::fmt {

inline std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// GPU-hours: two decimals, four below one hour so short jobs do not read as 0.00.
inline std::string hours(double v) { return fixed(v, v != 0 && v < 1 ? 4 : 2); }

inline std::string percent(double part, double whole) {
  return whole > 0 ? fixed(100 * part / whole, 1) + "%" : "-";
}

inline std::string pad(const std::string& s, std::size_t width, bool right) {
  if (s.size() >= width) return s;
  return right ? std::string(width - s.size(), ' ') + s : s + std::string(width - s.size(), ' ');
}

// At most `max` bytes of UTF-8 text, cut before a character boundary, never inside one.
inline std::string cut_utf8(const std::string& s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// Free text from sacct or the decision log must not break a table: cut, no control characters.
inline std::string cell(const std::string& s, std::size_t max) {
  std::string out;
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out.size() > max ? cut_utf8(out, max - 1) + "~" : out;
}

// RFC 4180 quoting; text that a spreadsheet would run as a formula is prefixed with '.
inline std::string csv(const std::string& s) {
  std::string v = s;
  if (!v.empty() && (v[0] == '=' || v[0] == '+' || v[0] == '-' || v[0] == '@')) v = "'" + v;
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

inline std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
  }
  return out;
}

constexpr const char* kUseful = "#3b6ea5";
// One colour per waste cause (or refusal kind), in the order legends list them.
constexpr const char* kWasteColours[] = {"#c0392b", "#e67e22", "#8e44ad", "#d4ac0d", "#7f8c8d",
                                         "#a93226"};

// The start of a self-contained page (inline CSS, no script, no external resource) up to and
// including <body>.
inline std::string html_head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<title>" + esc(title) + "</title><style>"
         "body{font-family:DejaVu Sans,Liberation Sans,Arial,sans-serif;margin:24px;color:#222;"
         "max-width:1080px}h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:26px 0 8px;"
         "border-bottom:1px solid #ccc}h3{font-size:14px;margin:14px 0 4px}.muted{fill:#888;color:#888}"
         ".cards{display:flex;gap:12px;margin:14px 0}.card{flex:1;border:1px solid #ddd;"
         "border-radius:6px;padding:10px 12px;background:#f8f9fb}.card b{display:block;font-size:20px}"
         ".card.bad b{color:#c0392b}.row{display:flex;gap:24px;flex-wrap:wrap}"
         "table{border-collapse:collapse;font-size:12px;margin-bottom:8px}"
         "th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}"
         "th:first-child,td:first-child{text-align:left}th{background:#eef1f5}"
         "td.l,th.l{text-align:left}.flag{color:#a04000;font-size:11px}"
         "h2.section{font-size:20px;margin-top:40px;border-bottom:2px solid #888}.missing{color:#a04000}"
         "svg text{font-size:11px;fill:#333}svg .grid{stroke:#e3e3e3}svg .axisline{stroke:#888}"
         "</style></head><body>\n";
}

inline std::string svg_open(double width, double height, const std::string& label) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(width, 0) + "\" height=\"" +
         fixed(height, 0) + "\" role=\"img\" aria-label=\"" + esc(label) + "\">";
}

inline std::string rect(double x, double y, double w, double h, const char* fill,
                        const std::string& title) {
  return "<rect x=\"" + fixed(x, 1) + "\" y=\"" + fixed(y, 1) + "\" width=\"" + fixed(w, 1) +
         "\" height=\"" + fixed(h, 1) + "\" fill=\"" + fill + "\"><title>" + esc(title) +
         "</title></rect>";
}

inline std::string text(double x, double y, const std::string& s, const char* anchor = "start",
                        const char* cls = "") {
  return "<text x=\"" + fixed(x, 1) + "\" y=\"" + fixed(y, 1) + "\" text-anchor=\"" + anchor +
         "\" class=\"" + cls + "\">" + esc(s) + "</text>";
}

inline std::string same(const std::string& s) { return s.empty() ? "(none)" : s; }

}  // namespace scaleguard::report::fmt
