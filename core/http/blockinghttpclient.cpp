#include "http/blockinghttpclient.h"

#include "http/httpclient.h"

#include <future>
#include <memory>

namespace once {

BlockingHttpClient::BlockingHttpClient(const QSslConfiguration &ssl)
{
    m_thread.setObjectName(QStringLiteral("once-http"));
    // One connection: the calls of one caller come one at a time.
    m_client = new HttpClient(1);
    m_client->setSslConfiguration(ssl);
    m_client->moveToThread(&m_thread);
    QObject::connect(&m_thread, &QThread::finished, m_client, &QObject::deleteLater);
    m_thread.start();
}

BlockingHttpClient::~BlockingHttpClient()
{
    m_thread.quit();
    m_thread.wait();
}

HttpResult BlockingHttpClient::send(const HttpRequest &request)
{
    auto promise = std::make_shared<std::promise<HttpResult>>();
    std::future<HttpResult> answer = promise->get_future();
    QMetaObject::invokeMethod(m_client, [client = m_client, request, promise] {
        client->send(request, client, [promise](const HttpResult &result) { promise->set_value(result); });
    });
    // The request's own timeout ends every exchange; the margin covers a connect that
    // hangs before it (HttpClient times the whole exchange from its first byte).
    if (answer.wait_for(std::chrono::milliseconds(request.timeoutMs + 5000)) != std::future_status::ready) {
        HttpResult lost;
        lost.status = HttpResult::Status::InDoubt;
        lost.error = QStringLiteral("no answer within %1 s").arg((request.timeoutMs + 5000) / 1000);
        return lost;
    }
    return answer.get();
}

} // namespace once
