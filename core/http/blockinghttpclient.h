#pragma once

#include "http/httpmessage.h"

#include <QSslConfiguration>
#include <QThread>

namespace once {

class HttpClient;

// HttpClient for a caller that must have the answer before it returns (a BrokerQueue's
// calls on the engine's thread): the client lives on a thread of its own for as long as
// this object, keeping its connections alive between calls, and the caller waits for
// each answer without an event loop of its own. A nested loop would run whatever else is
// queued for the calling thread (the engine's next turn, the console's next request) in
// the middle of the call; a thread per call would pay a thread and a connection each time.
//
// Like HttpClient it never re-sends: one send() writes the request at most once.
class BlockingHttpClient final
{
    Q_DISABLE_COPY_MOVE(BlockingHttpClient)

public:
    explicit BlockingHttpClient(const QSslConfiguration &ssl = QSslConfiguration::defaultConfiguration());
    ~BlockingHttpClient();

    HttpResult send(const HttpRequest &request);

private:
    QThread m_thread;
    HttpClient *m_client = nullptr; // lives on m_thread, deleted there
};

} // namespace once
