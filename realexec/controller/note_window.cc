#include "realexec/controller/note_window.h"

#include <utility>

namespace faultline::live {

NoteWindow::~NoteWindow() {
  if (timer_ != 0 && reactor_ != nullptr) reactor_->cancel_timer(timer_);
}

bool NoteWindow::admit(Reactor& reactor, Summary summary) {
  ++total_;
  const bool say = ++window_ <= per_minute_;
  if (!say) ++unsaid_;
  if (timer_ == 0) {
    reactor_ = &reactor;
    summary_ = std::move(summary);
    timer_ = reactor.add_timer(Duration::seconds(60), [this] {
      timer_ = 0;
      end_minute();
    });
  }
  return say;
}

void NoteWindow::end_minute() {
  if (timer_ != 0) reactor_->cancel_timer(timer_);
  timer_ = 0;
  if (unsaid_ > 0 && summary_) summary_(unsaid_, total_);
  window_ = 0;
  unsaid_ = 0;
}

}  // namespace faultline::live
