// Static files of the web console, compiled into the server (no CDN, no
// files to deploy): the page shell, the login page, one script, one style
// sheet. They hold no data; every page's content comes from Pages, fetched
// by the script with the bearer token kept in sessionStorage.
#ifndef DPOPT_SERVER_CONSOLE_ASSETS_H_
#define DPOPT_SERVER_CONSOLE_ASSETS_H_

namespace dpopt::server::console {

extern const char kShellHtml[];
extern const char kLoginHtml[];
extern const char kConsoleJs[];
extern const char kConsoleCss[];

}  // namespace dpopt::server::console

#endif  // DPOPT_SERVER_CONSOLE_ASSETS_H_
