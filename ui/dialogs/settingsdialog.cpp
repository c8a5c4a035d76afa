#include "dialogs/settingsdialog.h"

#include "settings/settings.h"
#include "widgets/traynotifier.h"

#include <QBoxLayout>
#include <QCheckBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QSpinBox>
#include <QSystemTrayIcon>

namespace once::ui {

SettingsDialog::SettingsDialog(QWidget *parent) : QDialog(parent)
{
    setWindowTitle(tr("Settings"));
    Settings settings;
    m_oldestAge = new QSpinBox;
    m_oldestAge->setRange(5, 7 * 24 * 3600);
    m_oldestAge->setSuffix(tr(" s"));
    m_oldestAge->setValue(settings.oldestAgeAlertSeconds());
    m_partnerFailingSends = new QSpinBox;
    m_partnerFailingSends->setObjectName(QStringLiteral("partnerFailingSends"));
    m_partnerFailingSends->setRange(2, 100);
    m_partnerFailingSends->setValue(settings.partnerFailingAlertSends());
    m_partnerDown = new QSpinBox;
    m_partnerDown->setObjectName(QStringLiteral("partnerDownSeconds"));
    m_partnerDown->setRange(5, 3600);
    m_partnerDown->setSuffix(tr(" s"));
    m_partnerDown->setValue(settings.partnerDownAlertSeconds());
    m_partnerDown->setToolTip(
        tr("Workers report their circuit breaker and failed sends in their heartbeat. The "
           "Overview warns as soon as a breaker opens, and raises the outage alert when the "
           "partner has failed every send for this long."));
    m_idempotencyWindow = new QSpinBox;
    m_idempotencyWindow->setRange(1, 24 * 90);
    m_idempotencyWindow->setSuffix(tr(" h"));
    m_idempotencyWindow->setValue(settings.idempotencyWindowHours());
    m_redriveRate = new QSpinBox;
    m_redriveRate->setRange(1, 100000);
    m_redriveRate->setSuffix(tr(" /s"));
    m_redriveRate->setValue(settings.redriveRate());

    auto *form = new QFormLayout;
    form->addRow(tr("Alert when the oldest ready message is older than"), m_oldestAge);
    m_partnerFailingSends->setToolTip(
        tr("The Overview raises \"the partner keeps failing\" when the partner has failed "
           "at least this many sends, of any events, in the last 5 minutes and applied "
           "none."));
    form->addRow(tr("Alert when the partner failed this many sends in 5 minutes, none applied"),
                 m_partnerFailingSends);
    form->addRow(tr("Call the partner down when it failed every send for"), m_partnerDown);
    form->addRow(tr("Partner keeps idempotency keys for"), m_idempotencyWindow);
    form->addRow(tr("Default redrive rate"), m_redriveRate);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto *notifications = new QGroupBox(tr("Desktop notifications"));
    auto *notificationsLayout = new QVBoxLayout(notifications);
    m_showInTray = new QCheckBox(tr("Show the console in the system tray and notify when:"));
    m_showInTray->setObjectName(QStringLiteral("showInTray"));
    m_showInTray->setChecked(settings.showInTray());
    if (!QSystemTrayIcon::isSystemTrayAvailable())
        m_showInTray->setToolTip(
            tr("This desktop has no system tray now; the setting applies where there is one."));
    notificationsLayout->addWidget(m_showInTray);
    for (const TrayNotifier::Kind kind : TrayNotifier::kinds()) {
        const QString name = TrayNotifier::settingsName(kind);
        auto *box = new QCheckBox(TrayNotifier::label(kind));
        box->setObjectName(QStringLiteral("notify-") + name);
        box->setChecked(settings.notifies(name, TrayNotifier::onByDefault(kind)));
        box->setEnabled(m_showInTray->isChecked());
        connect(m_showInTray, &QCheckBox::toggled, box, &QWidget::setEnabled);
        auto *indented = new QHBoxLayout;
        indented->addSpacing(20);
        indented->addWidget(box);
        notificationsLayout->addLayout(indented);
        m_notifies.insert(name, box);
    }

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(notifications);
    layout->addWidget(buttons);
}

void SettingsDialog::accept()
{
    Settings settings;
    settings.setOldestAgeAlertSeconds(m_oldestAge->value());
    settings.setPartnerFailingAlertSends(m_partnerFailingSends->value());
    settings.setIdempotencyWindowHours(m_idempotencyWindow->value());
    settings.setRedriveRate(m_redriveRate->value());
    settings.setPartnerDownAlertSeconds(m_partnerDown->value());
    settings.setShowInTray(m_showInTray->isChecked());
    for (auto it = m_notifies.cbegin(); it != m_notifies.cend(); ++it)
        settings.setNotifies(it.key(), it.value()->isChecked());
    QDialog::accept();
}

} // namespace once::ui
