#pragma once

#include "sim/partnersimulator.h"

#include <QObject>
#include <QTemporaryDir>
#include <QThread>
#include <QUrl>

namespace once {
class DemoProducer;
}

namespace once::ui {

// Everything `once-console --demo` runs besides the window: a fresh store in a
// temporary folder, the partner simulator with a realistic profile (a few 5xx and 429s,
// a short outage every few minutes, the occasional drop after accepting) and a producer,
// each on its own thread.
class Demo final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(Demo)

public:
    explicit Demo(QObject *parent = nullptr);
    ~Demo() override;

    bool start(QString *error);
    QString storeUrl() const;
    QUrl partnerUrl() const;
    static PartnerFaults realisticProfile();

private:
    QTemporaryDir m_folder;
    QThread m_partnerThread;
    QThread m_producerThread;
    PartnerSimulator *m_partner = nullptr;
    once::DemoProducer *m_producer = nullptr;
    quint16 m_port = 0;
};

} // namespace once::ui
