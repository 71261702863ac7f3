// See file_text.h. POSIX open/fstat/read.
#include "core/file_text.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace cpinfer {

bool read_whole_file(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    const int e = S_ISDIR(st.st_mode) ? EISDIR : errno;
    ::close(fd);
    errno = e;
    return false;
  }
  // A regular file: its size plus one byte, so that the read that finds EOF needs no growth.
  const size_t hint = S_ISREG(st.st_mode) ? size_t(st.st_size) + 1 : 0;
  out->assign(hint > 0 ? hint : 65536, '\0');
  size_t got = 0;
  for (;;) {
    if (got == out->size()) out->resize(out->size() * 2);
    const ssize_t n = ::read(fd, out->data() + got, out->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      errno = e;
      return false;
    }
    if (n == 0) break;
    got += size_t(n);
  }
  ::close(fd);
  out->resize(got);
  return true;
}

}  // namespace cpinfer
