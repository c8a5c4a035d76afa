#include "session/demo.h"

#include "sim/demoproducer.h"
#include "store/store.h"

namespace once::ui {

Demo::Demo(QObject *parent) : QObject(parent)
{
    m_partnerThread.setObjectName(QStringLiteral("demo partner"));
    m_producerThread.setObjectName(QStringLiteral("demo producer"));
}

Demo::~Demo()
{
    if (m_producer)
        QMetaObject::invokeMethod(m_producer, &DemoProducer::stop, Qt::BlockingQueuedConnection);
    m_producerThread.quit();
    m_producerThread.wait();
    m_partnerThread.quit();
    m_partnerThread.wait();
}

PartnerFaults Demo::realisticProfile()
{
    PartnerFaults profile;
    profile.failRate = 0.02;
    profile.throttleRate = 0.02;
    profile.retryAfterSeconds = 2;
    profile.latencyMs = 60;
    profile.outageAfterRequests = 600;
    profile.outageSeconds = 15;
    profile.outageEverySeconds = 180;
    profile.dropAfterAcceptRate = 0.005;
    return profile;
}

bool Demo::start(QString *error)
{
    if (!m_folder.isValid()) {
        *error = tr("cannot create a temporary folder for the demo store");
        return false;
    }
    {
        // Create the schema before anyone else opens the file.
        auto store = Store::open(storeUrl(), error);
        if (!store)
            return false;
    }
    m_partner = new PartnerSimulator(realisticProfile());
    if (!m_partner->listen(QHostAddress::LocalHost, 0, error)) {
        delete m_partner;
        m_partner = nullptr;
        return false;
    }
    m_port = m_partner->port();
    m_partner->moveToThread(&m_partnerThread);
    connect(&m_partnerThread, &QThread::finished, m_partner, &QObject::deleteLater);
    m_partnerThread.start();

    m_producer = new DemoProducer(storeUrl(), 20);
    m_producer->moveToThread(&m_producerThread);
    connect(&m_producerThread, &QThread::started, m_producer, &DemoProducer::start);
    connect(&m_producerThread, &QThread::finished, m_producer, &QObject::deleteLater);
    m_producerThread.start();
    return true;
}

QString Demo::storeUrl() const
{
    return QStringLiteral("sqlite:") + m_folder.filePath(QStringLiteral("demo.sqlite"));
}

QUrl Demo::partnerUrl() const
{
    return QUrl(QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_port));
}

} // namespace once::ui
